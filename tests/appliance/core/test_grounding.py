"""Grounded answers through the real chat service: the evidence card comes before any generated
text, the answer is checked against the sources and the verdicts are stored, the three answer
modes, and the pure parts of ``grounding`` (card, check) on fixed sources."""

from __future__ import annotations

import time

import pytest
from support.appliances import build_small_appliance

from appliance.core.config import load_config
from appliance.core.db.models import Message
from appliance.core.services import grounding
from appliance.core.services.chat import DeltaEvent, DoneEvent, RetrievalEvent
from appliance.core.services.conversations import ConversationService
from appliance.core.services.grounding import TurnGrounding
from rag.evidence import EvidenceSpan
from rag.prompt import Citation

TRAVEL = (
    "# Business travel\n\n## The Travel Desk\n\n"
    "The Travel Desk books flights, trains and hotels for every business trip. "
    "Call the Travel Desk on extension 3350, or write to travel@hanbit.example. "
    "Bookings need the manager's approval first.\n\n"
    "## Hotels\n\nThe nightly hotel limit within Korea is 150,000 KRW.\n"
)
QUESTION = "What is the phone extension of the Travel Desk?"


@pytest.fixture(scope="module")
def site(tmp_path_factory, model_dir, engine, embedder, config_for):  # noqa: ANN001, ANN201
    app = build_small_appliance(
        tmp_path_factory.mktemp("grounding"), model_dir, engine, embedder, config_for
    )
    assert app.ingest.ingest_bytes("travel.md", TRAVEL.encode()).status == "indexed"
    user = app.auth.create_user("grounded-staff", "password-123")
    yield app, user
    app.db.dispose()  # the engine is the session's: other modules use it after this one


def use_mode(app, mode: str) -> None:  # noqa: ANN001
    app.settings.update("admin", {"answer_mode": mode})


def test_grounded_turn_shows_the_card_first_and_stores_the_verdicts(site) -> None:  # noqa: ANN001
    app, user = site
    use_mode(app, "grounded")
    events = list(app.chat.ask(user, QUESTION))
    first = events[0]
    assert isinstance(first, RetrievalEvent) and first.mode == "grounded"
    # the card is out before the first generated token, verbatim, with its chunk's number
    assert first.evidence, "no evidence sentence for a question the document answers"
    top = first.evidence[0]
    assert "3350" in top.text
    cited = {c.number: c for c in first.citations}
    assert cited[top.number].text[top.start : top.end] == top.text
    assert isinstance(events[1], DeltaEvent)
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.check is not None
    assert done.check.total == len([v for v in done.check.sentences if v.claim])
    with app.db.session() as s:
        stored = s.get(Message, done.message_id)
        assert stored.answer_mode == "grounded"
        assert stored.evidence[0]["text"] == top.text
        assert stored.claims_total == done.check.total
        assert stored.claims_supported == done.check.supported
    shown = ConversationService(app.db, app.chat).turns(user, done.conversation_id)[-1]
    assert shown.evidence[0]["number"] == top.number
    assert shown.verification["total"] == done.check.total


def test_extractive_answers_with_the_card_alone(site) -> None:  # noqa: ANN001
    app, user = site
    use_mode(app, "extractive")
    started = time.perf_counter()
    events = list(app.chat.ask(user, QUESTION))
    took = time.perf_counter() - started
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.stats.completion_tokens == 0  # nothing was generated
    assert "3350" in done.answer and "[" in done.answer
    assert done.check.total >= 1 and done.check.supported == done.check.total  # verbatim
    assert took < 5  # retrieval and the card only (no prefill, no decode)
    # a question the documents do not answer gets no card, and says so
    other = list(app.chat.ask(user, "Who won the football world cup in 1998?"))
    assert other[0].evidence == ()
    assert other[-1].answer == grounding.NONE_FOUND["en"]
    use_mode(app, "grounded")


def test_write_an_answer_replaces_an_extractive_one_with_a_grounded_one(site) -> None:  # noqa: ANN001
    app, user = site
    use_mode(app, "extractive")
    convs = ConversationService(app.db, app.chat)
    first = list(convs.ask(user, QUESTION))[-1]
    assert isinstance(first, DoneEvent) and first.stats.completion_tokens == 0
    # "Write an answer": the same question, grounded, while the settings stay extractive
    events = list(convs.regenerate(user, first.conversation_id, "grounded"))
    assert events[0].mode == "grounded" and "3350" in events[0].evidence[0].text
    assert any(isinstance(e, DeltaEvent) for e in events)  # the model wrote this time
    written = events[-1]
    assert isinstance(written, DoneEvent) and written.stats.completion_tokens > 0
    turns = convs.turns(user, first.conversation_id)
    assert len(turns) == 1 and turns[0].answer_mode == "grounded"  # replaced, not appended
    # a plain regenerate keeps the settings' mode
    again = list(convs.regenerate(user, first.conversation_id))[-1]
    assert again.stats.completion_tokens == 0
    assert convs.turns(user, first.conversation_id)[0].answer_mode == "extractive"
    use_mode(app, "grounded")


def test_generative_shows_no_card_but_checks_the_answer(site) -> None:  # noqa: ANN001
    app, user = site
    use_mode(app, "generative")
    events = list(app.chat.ask(user, "Which hotel limit applies within Korea?"))
    assert events[0].evidence == ()
    assert events[-1].check is not None
    use_mode(app, "grounded")


def test_the_metrics_count_checked_sentences(site) -> None:  # noqa: ANN001
    app, user = site
    before = app.chat.metrics.sentences.labels(verdict="supported")._value.get()
    before += app.chat.metrics.sentences.labels(verdict="unsupported")._value.get()
    done = list(app.chat.ask(user, QUESTION))[-1]
    after = app.chat.metrics.sentences.labels(verdict="supported")._value.get()
    after += app.chat.metrics.sentences.labels(verdict="unsupported")._value.get()
    assert after - before == done.check.total
    assert b"appliance_answer_sentences_total" in app.chat.metrics.render()


# ---- the pure parts, on fixed sources -------------------------------------------------------

SOURCE = "Call the Travel Desk on extension 3350, or write to travel@hanbit.example."
CITATION = Citation(1, 7, 1, "Business travel", "The Travel Desk", None, "travel.md", SOURCE)


def fixed(sources: dict[int, str]) -> TurnGrounding:
    return TurnGrounding("grounded", (), sources, tuple(sources.values()))


def test_each_profile_gets_its_measured_default_mode() -> None:
    # SmolLM2-135M on the CPU profile is below the bar (README § Answer modes): the card
    # alone, "Write an answer" on request; the GPU profiles' models generate, grounded
    assert grounding.default_answer_mode("cpu") == "extractive"
    for profile in ("h100", "h200", "multi-node"):
        assert grounding.default_answer_mode(profile) == "grounded"
    assert load_config(environ={}).chat.answer_mode == ""  # empty: the profile decides


def test_an_invented_extension_is_flagged_and_a_quoted_one_passes() -> None:
    invented = grounding.check(
        "The Travel Desk's phone extension is 12345 [1].", fixed({1: SOURCE})
    )
    assert not invented.sentences[0].supported
    assert invented.sentences[0].unsupported_facts == ("12345",)
    quoted = grounding.check("Call the Travel Desk on extension 3350 [1].", fixed({1: SOURCE}))
    assert quoted.sentences[0].supported and quoted.supported == quoted.total == 1
    bad = grounding.check("Call extension 3350 [4].", fixed({1: SOURCE}))
    assert bad.bad_markers == (4,)


def test_the_card_keeps_cited_and_relevant_sentences_only() -> None:
    start = SOURCE.index("Call")
    strong = EvidenceSpan(7, start, len(SOURCE), SOURCE[start:], 0.6)
    weak = EvidenceSpan(7, 0, 4, SOURCE[:4], grounding.MIN_EVIDENCE_SCORE - 0.01)
    uncited = EvidenceSpan(99, 0, 4, "Else", 0.9)
    card = grounding.card([uncited, strong, weak], [CITATION])
    assert [(c.number, c.text) for c in card] == [(1, SOURCE[start:])]
    assert grounding.extractive_answer(card, "question").endswith("[1]")
    assert grounding.extractive_answer((), "출장 데스크 내선은?") == grounding.NONE_FOUND["ko"]


def test_sources_cover_the_whole_conversation() -> None:
    earlier = [[{"number": 3, "text": "older chunk"}], []]
    sources = grounding.sources_by_number([CITATION], earlier)
    assert sources == {3: "older chunk", 1: SOURCE}
