"""The embedded engine with the real SmolLM2-135M model: streaming, stats, prefix reuse,
stop strings, cancellation, busy and oversize errors, UTF-8 integrity."""

from __future__ import annotations

import time
import uuid

import pytest

from engine.base import (
    EngineBusy,
    Finished,
    GenerateRequest,
    PromptTooLong,
    SamplingParams,
    TextDelta,
)


def run(engine, request: GenerateRequest) -> tuple[list[str], Finished]:  # noqa: ANN001
    deltas, final = [], None
    for item in engine.generate(request):
        if isinstance(item, TextDelta):
            deltas.append(item.text)
        else:
            final = item
    assert isinstance(final, Finished)
    return deltas, final


def unique_system(words: int = 120) -> str:
    # a per-test marker first, so no other test's cache entry shares this prefix
    return f"Session {uuid.uuid4().hex}. " + "You answer questions about office policy. " * words


def test_streams_text_and_reports_stats(engine) -> None:  # noqa: ANN001
    messages = (("system", unique_system(10)), ("user", "Name three colours."))
    deltas, final = run(engine, GenerateRequest(messages=messages, sampling=SamplingParams(16)))
    stats = final.stats
    assert "".join(deltas).strip()
    assert stats.prompt_tokens == engine.count_tokens(engine.render_chat(messages))
    assert 1 <= stats.completion_tokens <= 16
    assert stats.finish_reason in ("stop", "length")
    assert 0 < stats.ttft_s <= stats.e2e_s
    assert stats.cached_tokens < 10  # at most the chat template opening, shared by tests


def test_second_request_reuses_the_shared_prefix(engine) -> None:  # noqa: ANN001
    system = unique_system()
    first = (("system", system), ("user", "What is the leave policy?"))
    second = (("system", system), ("user", "How do I reset my VPN password?"))
    _, cold = run(engine, GenerateRequest(messages=first, sampling=SamplingParams(4)))
    _, warm = run(engine, GenerateRequest(messages=second, sampling=SamplingParams(4)))
    a = engine.encode(engine.render_chat(first))
    b = engine.encode(engine.render_chat(second))
    shared = next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    assert shared > 800
    # only the chat template's opening tokens can be shared with other tests' prompts
    assert cold.stats.cached_tokens < 10
    # exact: the radix cache reuses every shared token (page size 1)
    assert warm.stats.cached_tokens == shared
    assert warm.stats.ttft_s < cold.stats.ttft_s


def test_metrics_count_prompt_and_cached_tokens(engine) -> None:  # noqa: ANN001
    before = engine.metrics()
    system = unique_system(20)
    _, one = run(
        engine,
        GenerateRequest(messages=(("system", system), ("user", "a")), sampling=SamplingParams(2)),
    )
    after = engine.metrics()
    assert after["prompt_tokens_total"] - before["prompt_tokens_total"] == one.stats.prompt_tokens
    assert after["num_requests_total"] - before["num_requests_total"] == 1
    assert after["num_used_tokens"] > 0


def test_stop_string_ends_generation_before_it(engine) -> None:  # noqa: ANN001
    prompt = "Count: 1, 2, 3, 4, 5, 6, 7, 8, 9,"
    deltas, free = run(engine, GenerateRequest(prompt=prompt, sampling=SamplingParams(12)))
    text = "".join(deltas)
    assert "," in text  # the model continues the list
    stop_at = text.index(",")
    deltas, stopped = run(
        engine, GenerateRequest(prompt=prompt, sampling=SamplingParams(12, stop=(",",)))
    )
    assert "".join(deltas) == text[:stop_at]
    assert stopped.stats.finish_reason == "stop"


def test_seeded_sampling_is_reproducible(engine) -> None:  # noqa: ANN001
    sp = SamplingParams(12, temperature=0.9, top_p=0.9, seed=1234)
    req = GenerateRequest(prompt="Once upon a time", sampling=sp)
    assert run(engine, req)[0] == run(engine, req)[0]


def test_closing_the_stream_cancels_and_frees_the_engine(engine) -> None:  # noqa: ANN001
    before = engine.metrics()["num_aborted_requests_total"]
    stream = engine.generate(
        GenerateRequest(prompt="List every month of the year:", sampling=SamplingParams(200))
    )
    first = next(stream)
    assert isinstance(first, TextDelta)
    start = time.perf_counter()
    stream.close()
    deadline = time.time() + 10
    while engine.metrics()["num_aborted_requests_total"] == before and time.time() < deadline:
        time.sleep(0.05)
    assert engine.metrics()["num_aborted_requests_total"] == before + 1
    assert time.perf_counter() - start < 5  # aborted at the next step, not after 200 tokens
    _, final = run(engine, GenerateRequest(prompt="Hello", sampling=SamplingParams(2)))
    assert final.stats.completion_tokens >= 1


def test_prompt_over_the_context_window_is_refused_before_compute(engine) -> None:  # noqa: ANN001
    before = engine.metrics()["num_requests_total"]
    with pytest.raises(PromptTooLong, match="context window"):
        engine.generate(GenerateRequest(prompt="word " * (engine.context_length + 10)))
    assert engine.metrics()["num_requests_total"] == before


def test_full_queue_answers_busy(model_dir) -> None:  # noqa: ANN001
    from engine.embedded.engine import EmbeddedEngine

    small = EmbeddedEngine(model_dir, max_queue=1)
    try:
        long = SamplingParams(64, ignore_eos=True)
        running = small.generate(GenerateRequest(prompt="Tell me a story.", sampling=long))
        next(running)  # the first request is running now
        waiting = small.generate(GenerateRequest(prompt="Another story.", sampling=long))
        with pytest.raises(EngineBusy, match="busy"):
            small.generate(GenerateRequest(prompt="A third one.", sampling=long))
        running.close()
        waiting.close()
    finally:
        small.close()


def test_korean_streaming_never_shows_a_broken_character(engine) -> None:  # noqa: ANN001
    messages = (("user", "안녕하세요! 한국어로 짧게 인사해 주세요. 반갑습니다."),)
    deltas, final = run(engine, GenerateRequest(messages=messages, sampling=SamplingParams(48)))
    assert final.stats.completion_tokens > 0
    assert all("\ufffd" not in d for d in deltas)
    assert "".join(deltas).encode("utf-8").decode("utf-8") == "".join(deltas)


def test_flush_cache_drops_every_cached_prefix(engine) -> None:  # noqa: ANN001
    request = GenerateRequest(
        messages=(("system", unique_system(30)), ("user", "hi")), sampling=SamplingParams(2)
    )
    run(engine, request)
    _, warm = run(engine, request)
    assert warm.stats.cached_tokens == warm.stats.prompt_tokens - 1
    engine.flush_cache()
    _, cold = run(engine, request)
    assert cold.stats.cached_tokens == 0
    # only this request's tokens are cached now: its prompt and at most its fed answer tokens
    used = engine.metrics()["num_used_tokens"]
    assert cold.stats.prompt_tokens <= used < cold.stats.prompt_tokens + 2


TICKET_SCHEMA = {
    "type": "object",
    "properties": {
        "priority": {"enum": ["P1", "P2", "P3", "P4"]},
        "summary": {"type": "string", "maxLength": 24},
        "hours": {"type": "integer", "minimum": 0, "maximum": 72},
    },
    "required": ["priority", "summary", "hours"],
    "additionalProperties": False,
}


def test_json_schema_output_always_parses_and_validates(engine) -> None:  # noqa: ANN001
    import json

    import jsonschema

    messages = (("user", "My laptop will not boot. File a helpdesk ticket as JSON."),)
    plain = GenerateRequest(messages=messages, sampling=SamplingParams(40))
    requests = [
        GenerateRequest(
            messages=messages,
            sampling=SamplingParams(80, temperature=t, seed=s),
            json_schema=json.dumps(TICKET_SCHEMA),
        )
        for t, s in ((0.0, None), (1.0, 7), (1.0, 8))
    ]
    # constrained and free requests share decode steps
    streams = [engine.generate(r) for r in [*requests, plain]]
    outputs = []
    for stream in streams:
        text, final = "", None
        for item in stream:
            if isinstance(item, TextDelta):
                text += item.text
            else:
                final = item
        outputs.append((text, final.stats))
    for text, stats in outputs[:3]:
        jsonschema.validate(json.loads(text), TICKET_SCHEMA)
        assert stats.finish_reason == "stop"
    assert outputs[3][1].completion_tokens > 0


def test_invalid_json_schema_is_refused_before_any_work(engine) -> None:  # noqa: ANN001
    from engine.base import InvalidRequest

    with pytest.raises(InvalidRequest, match="json_schema"):
        engine.generate(GenerateRequest(prompt="x", json_schema="{not json"))
    with pytest.raises(InvalidRequest, match="json_schema"):
        engine.generate(GenerateRequest(prompt="x", json_schema='{"type": "no-such-type"}'))
