"""The repeat stop through the real chat service and engine: with the penalties off, the small
model loops on a handbook question; with ``stop_repeats`` the answer ends before its first
repeat, what was streamed is what is stored, generation is aborted at the engine (well under
the length limit), and the stored turn says why it ended."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from appliance.bench.quality_score import loops
from appliance.core.services.chat import DeltaEvent, DoneEvent
from appliance.core.services.conversations import ConversationService
from ui.chat.view import conversation_view

# each loops greedily without penalties in fp32 and bf16 alike, but a loop's onset hangs on the
# last bits of the arithmetic, which differ by kernel route (GEMV, oneDNN, AMX): the test takes
# the first that loops on this machine and would run to the length limit
QUESTIONS = (
    "What hours is the IT helpdesk staffed?",
    "How do I reset my VPN password?",
    "What is tailgating?",
    "Where should I send a suspicious phishing email?",
)
TOKENS = 128
NO_PENALTIES = {
    "repetition_penalty": 1.0,
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "answer_mode": "generative",
    "max_new_tokens": TOKENS,
    "ordering": "relevance",
    "riders": 0,
}


@pytest.fixture
def unpenalised(appliance):  # noqa: ANN001, ANN201
    """The shared appliance with the penalties off; its settings are put back afterwards."""
    before = asdict(appliance.settings.current())
    yield appliance
    appliance.settings.update("test", {k: before[k] for k in (*NO_PENALTIES, "stop_repeats")})


def _ask(app, stop: bool, question: str):  # noqa: ANN001, ANN202
    app.settings.update("test", {**NO_PENALTIES, "stop_repeats": stop})
    app.engine.flush_cache()
    user = app.auth.principal_for(app.config.bootstrap.admin_username)
    events = list(app.chat.ask(user, question))
    done = events[-1]
    assert isinstance(done, DoneEvent)
    shown = "".join(e.text for e in events if isinstance(e, DeltaEvent))
    return user, done, shown


def _stopped(app) -> float:  # noqa: ANN001
    """``appliance_repeats_stopped_total`` as ``/metrics`` renders it."""
    for line in app.chat.metrics.render().decode().splitlines():
        if line.startswith("appliance_repeats_stopped_total "):
            return float(line.split()[1])
    raise AssertionError("appliance_repeats_stopped_total is not rendered")


def test_a_looping_answer_is_stopped_before_its_repeat(unpenalised) -> None:  # noqa: ANN001
    app = unpenalised
    for question in QUESTIONS:
        _, free, _ = _ask(app, False, question)
        assert not free.repeated  # nothing is stopped with the stop off
        # the model really loops, and would go on to the length limit: a loop the model ends
        # by itself soon after its repeat may end before the stop's abort reaches the engine
        if loops(free.answer) and free.stats.finish_reason == "length":
            break
    else:
        pytest.skip("none of the questions loops to the length limit under this machine's kernels")

    before = _stopped(app)
    user, done, shown = _ask(app, True, question)
    assert _stopped(app) == before + 1  # /metrics counts it
    assert done.repeated and not loops(done.answer)
    assert shown == done.answer  # nothing was shown that is not stored
    assert free.answer.startswith(done.answer.rstrip())  # the same answer, up to the repeat
    assert done.stats.finish_reason == "abort"  # the engine was told to stop
    assert done.stats.completion_tokens < TOKENS

    convs = ConversationService(app.db, app.chat)
    turns = convs.turns(user, done.conversation_id)
    assert turns[-1].finish_reason == "repetition" and turns[-1].answer == done.answer
    view = conversation_view(turns, "en")
    assert "began to repeat itself" in view.history[-1]["content"]
    assert not view.cut  # no Continue: the answer was not cut at the length limit


def test_the_stop_aborts_over_the_sglang_protocol(base: str, model_dir) -> None:  # noqa: ANN001
    """Through the SGLang client and ``engine-server``: the guard's abort reaches the server
    (``/abort_request``), and the stream still ends with its stats."""
    from appliance.core.services.relay import relay
    from engine.base import GenerateRequest, SamplingParams
    from engine.sglang.client import SGLangEngine
    from rag.repeats import RepeatGuard

    client = SGLangEngine(base, tokenizer=str(model_dir), timeout_s=60)
    sentence = "the badge desk is on floor two."
    prompt = "Repeat after me: " + " ".join([sentence] * 4)  # loops greedily (penalty tests)
    rid = "repeat-stop-over-http"
    stream = client.generate(
        GenerateRequest(prompt=prompt, sampling=SamplingParams(max_new_tokens=200), request_id=rid)
    )
    parts: list[str] = []
    guard = RepeatGuard(said_before=prompt)  # as a continuation: the prompt counts as said
    inner = relay(stream, parts, guard, lambda: client.abort(rid))
    shown = []
    try:
        while True:
            shown.append(next(inner))
    except StopIteration as end:
        relayed = end.value
    assert relayed.repeated and relayed.finish == "repetition"
    assert relayed.stats.finish_reason == "abort" and relayed.stats.completion_tokens < 200
    assert sentence not in "".join(shown)  # the repeat was never released
