"""A chat turn through the real services: retrieval over the sample corpus, the embedded
engine, storage; append-only conversations; ownership; errors that lose nothing."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from appliance.core.config import SAMPLE_CORPUS
from appliance.core.db.models import Document, Message
from appliance.core.errors import ChatError
from appliance.core.services.chat import (
    ChatService,
    DeltaEvent,
    DoneEvent,
    ErrorEvent,
    RetrievalEvent,
)
from appliance.core.services.conversations import ConversationService
from engine.base import EngineBusy


def ask(appliance, user, question: str, conv: int | None = None) -> list:  # noqa: ANN001
    return list(appliance.chat.ask(user, question, conv))


def convs(appliance) -> ConversationService:  # noqa: ANN001
    """Where stored conversations are read."""
    return ConversationService(appliance.db, appliance.chat)


@pytest.fixture(scope="module")
def staff(appliance):  # noqa: ANN001, ANN201
    return appliance.auth.create_user("staff-chat", "password-123", role="staff")


def test_sample_corpus_is_ingested_on_first_start(appliance) -> None:  # noqa: ANN001
    corpus = SAMPLE_CORPUS
    files = [p for p in corpus.iterdir() if p.suffix in (".md", ".txt")]
    assert 8 <= len(files) <= 12
    # other test modules add documents to the shared appliance: look for the sample files
    with appliance.db.session() as s:
        names = set(s.scalars(select(Document.source_path)))
    assert {p.name for p in files} <= names
    assert appliance.knowledge.index.size > 50


def test_a_turn_streams_cites_and_is_stored(appliance, staff) -> None:  # noqa: ANN001
    events = ask(appliance, staff, "How do I reset my VPN password?")
    assert isinstance(events[0], RetrievalEvent)
    assert events[0].citations[0].source == "it-vpn-access.md"
    assert any(isinstance(e, DeltaEvent) and e.text for e in events)
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.answer == "".join(e.text for e in events if isinstance(e, DeltaEvent))
    assert done.stats.prompt_tokens > 0
    messages = convs(appliance).messages(staff, done.conversation_id)
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[1].content == done.answer
    assert messages[1].prompt_tokens == done.stats.prompt_tokens
    assert messages[1].citations[0]["source"] == "it-vpn-access.md"


def test_follow_up_turn_is_append_only_and_hits_the_cache(appliance, staff, appending) -> None:  # noqa: ANN001
    first = ask(appliance, staff, "How many days of annual leave do I get?")[-1]
    conv = first.conversation_id
    second_events = ask(appliance, staff, "How do I request leave in the portal?", conv)
    second = second_events[-1]
    assert isinstance(second, DoneEvent) and second.conversation_id == conv
    # turn 2's prompt starts with turn 1's prompt and answer, token for token
    engine = appliance.engine
    turn1 = engine.encode(engine.render_chat(_messages_of(appliance, staff, conv, upto=1)))
    turn2 = engine.encode(engine.render_chat(_messages_of(appliance, staff, conv, upto=2)))
    answer1 = engine.encode(first.answer)
    assert turn2[: len(turn1)] == turn1
    assert second.stats.cached_tokens >= len(turn1) - 1
    assert second.stats.cached_tokens < second.stats.prompt_tokens
    assert len(answer1) > 0
    # chunks already in the conversation are not repeated: numbers continue
    numbers = [c.number for c in second_events[0].citations]
    assert len(set(numbers)) == len(numbers)
    # the stored turn says which layout was sent and what the cache shadow predicted for it:
    # it held turn 1 (prompt and answer), so it expected about what the engine reported
    with appliance.db.session() as s:
        reply = s.scalars(
            select(Message).where(Message.conversation_id == conv, Message.role == "assistant")
        ).all()[-1]
        assert reply.layout == "append" and reply.predicted_cached is not None
        assert reply.predicted_cached >= len(turn1) // 2
        # the engine is shared with other tests' appliances, whose turns the shadow never saw:
        # it may hold more than predicted (a prefix another test cached), never much less
        assert reply.predicted_cached - reply.cached_tokens <= 0.1 * reply.prompt_tokens
    last = convs(appliance).turns(staff, conv)[-1].stats  # what the per-answer panel shows
    assert (last.layout, last.predicted_cached) == ("append", reply.predicted_cached)


def _messages_of(appliance, user, conv: int, upto: int) -> tuple:  # noqa: ANN001
    """The prompt messages of turn ``upto`` (1-based), rebuilt from what was stored."""
    from rag.prompt import build_messages

    stored = convs(appliance).messages(user, conv)
    with appliance.db.session() as s:
        prompt_texts = [
            m.prompt_text
            for m in s.scalars(select(Message).where(Message.conversation_id == conv))
            if m.role == "user"
        ]
    history = []
    for i in range(upto - 1):
        history += [("user", prompt_texts[i]), ("assistant", stored[2 * i + 1].content)]
    return build_messages(appliance.config.chat.system_prompt, history, prompt_texts[upto - 1])


def test_users_see_only_their_own_conversations(appliance, staff) -> None:  # noqa: ANN001
    done = ask(appliance, staff, "What is the phishing report address?")[-1]
    other = appliance.auth.create_user("other-staff", "password-456")
    assert done.conversation_id not in [c.id for c in convs(appliance).list(other)]
    with pytest.raises(ChatError) as err:
        convs(appliance).messages(other, done.conversation_id)
    assert err.value.kind == "not_found"
    with pytest.raises(ChatError):
        appliance.chat.ask(other, "continue", done.conversation_id)


@pytest.mark.parametrize(
    ("question", "kind"), [("", "empty"), ("   ", "empty"), ("x" * 5000, "too_long")]
)
def test_bad_questions_are_refused_before_any_work(appliance, staff, question, kind) -> None:  # noqa: ANN001
    with pytest.raises(ChatError) as err:
        appliance.chat.ask(staff, question)
    assert err.value.kind == kind


class _BusyEngine:
    """Wraps the real engine but refuses work, as a full queue does."""

    def __init__(self, real) -> None:  # noqa: ANN001
        self.real = real

    def __getattr__(self, name: str):  # noqa: ANN204
        return getattr(self.real, name)

    def generate(self, request):  # noqa: ANN001, ANN201
        raise EngineBusy("engine busy: 16 requests already waiting", retry_after_s=3)


class _DyingEngine(_BusyEngine):
    """Streams one delta from the real engine, then fails as a crashed engine would."""

    def generate(self, request):  # noqa: ANN001, ANN201
        from engine.base import EngineError

        stream = self.real.generate(request)

        def gen():  # noqa: ANN202
            yield next(stream)
            stream.close()
            raise EngineError("engine process exited")

        return gen()


def _count_messages(appliance) -> int:  # noqa: ANN001
    with appliance.db.session() as s:
        return s.scalar(select(func.count(Message.id)))


def test_busy_engine_gives_a_clear_error_and_stores_nothing(appliance, staff) -> None:  # noqa: ANN001
    chat = ChatService(
        appliance.db,
        appliance.knowledge,
        _BusyEngine(appliance.engine),
        appliance.config.chat,
        appliance.settings,
        appliance.ordering,
    )
    before = _count_messages(appliance)
    with pytest.raises(ChatError) as err:
        chat.ask(staff, "How do I reset my VPN password?")
    assert err.value.kind == "busy" and err.value.retry_after_s == 3
    assert _count_messages(appliance) == before


def test_engine_dying_mid_answer_reports_it_and_stores_no_half_turn(appliance, staff) -> None:  # noqa: ANN001
    chat = ChatService(
        appliance.db,
        appliance.knowledge,
        _DyingEngine(appliance.engine),
        appliance.config.chat,
        appliance.settings,
        appliance.ordering,
    )
    before = _count_messages(appliance)
    events = list(chat.ask(staff, "Where is the helpdesk?"))
    assert isinstance(events[-1], ErrorEvent)
    assert "engine process exited" in events[-1].message
    assert _count_messages(appliance) == before


def test_admin_settings_apply_to_the_next_turn(appliance, staff) -> None:  # noqa: ANN001
    before = appliance.settings.current()
    try:
        appliance.settings.update("admin", {"top_k": 2, "ordering": "doc_id", "max_new_tokens": 4})
        events = ask(appliance, staff, "Who approves travel expenses?")
        done = events[-1]
        assert isinstance(done, DoneEvent)
        assert len(events[0].citations) == 2
        assert done.stats.completion_tokens <= 4
        [_, reply] = convs(appliance).messages(staff, done.conversation_id)
        with appliance.db.session() as s:
            assert s.get(Message, reply.id).ordering == "doc_id"
    finally:
        appliance.settings.update(
            "admin", {k: getattr(before, k) for k in ("top_k", "ordering", "max_new_tokens")}
        )


def test_continue_grows_a_cut_answer_in_place_on_the_cached_prefix(appliance, staff) -> None:  # noqa: ANN001
    before = appliance.settings.current()
    try:
        appliance.settings.update("admin", {"max_new_tokens": 6, "min_new_tokens": 0})
        first = ask(appliance, staff, "How do I reset my VPN password?")[-1]
        assert first.stats.finish_reason == "length"
        conv = first.conversation_id
        events = list(appliance.chat.continue_answer(staff, conv))
    finally:
        appliance.settings.update(
            "admin", {k: getattr(before, k) for k in ("max_new_tokens", "min_new_tokens")}
        )
    assert isinstance(events[0], RetrievalEvent) and events[0].retrieval_ms == 0.0
    assert [c.number for c in events[0].citations] == [
        c["number"] for c in convs(appliance).messages(staff, conv)[1].citations
    ]
    added = "".join(e.text for e in events if isinstance(e, DeltaEvent))
    done = events[-1]
    assert isinstance(done, DoneEvent) and added
    # the same answer, grown: same id, the old text then the new
    assert done.message_id == first.message_id and done.answer == first.answer + added
    [_, reply] = convs(appliance).messages(staff, conv)
    assert reply.id == first.message_id and reply.content == first.answer + added
    # the prompt was the turn's prompt plus the answer so far: all of the turn's prompt came
    # from the prefix cache
    assert done.stats.prompt_tokens > first.stats.prompt_tokens
    assert done.stats.cached_tokens >= first.stats.prompt_tokens - 1
    # measures over both requests: tokens and engine time add up, TTFT stays the first's
    assert reply.completion_tokens == first.stats.completion_tokens + done.stats.completion_tokens
    assert reply.prompt_tokens == first.stats.prompt_tokens + done.stats.prompt_tokens
    assert reply.cached_tokens == first.stats.cached_tokens + done.stats.cached_tokens
    assert reply.ttft_ms == pytest.approx(first.stats.ttft_s * 1000)
    assert reply.e2e_ms == pytest.approx((first.stats.e2e_s + done.stats.e2e_s) * 1000)
    assert reply.finish_reason == done.stats.finish_reason


def test_continue_is_refused_unless_the_last_answer_was_cut(appliance, staff) -> None:  # noqa: ANN001
    before = appliance.settings.current()
    try:
        appliance.settings.update("admin", {"max_new_tokens": 4, "min_new_tokens": 0})
        cut = ask(appliance, staff, "Where is the helpdesk?")[-1]
    finally:
        appliance.settings.update(
            "admin", {k: getattr(before, k) for k in ("max_new_tokens", "min_new_tokens")}
        )
    conv = cut.conversation_id
    other = appliance.auth.create_user("other-continue", "password-456")
    with pytest.raises(ChatError) as err:
        appliance.chat.continue_answer(other, conv)
    assert err.value.kind == "not_found"
    # a busy engine refuses before anything changes, as in a turn
    busy = ChatService(
        appliance.db,
        appliance.knowledge,
        _BusyEngine(appliance.engine),
        appliance.config.chat,
        appliance.settings,
        appliance.ordering,
    )
    with pytest.raises(ChatError) as err:
        busy.continue_answer(staff, conv)
    assert err.value.kind == "busy"
    assert convs(appliance).messages(staff, conv)[1].content == cut.answer
    # an answer that ended on its own is not continued
    with appliance.db.session() as s:
        s.get(Message, cut.message_id).finish_reason = "stop"
    with pytest.raises(ChatError) as err:
        appliance.chat.continue_answer(staff, conv)
    assert err.value.kind == "invalid"


def test_a_follow_up_retrieves_what_it_asks(appliance, staff) -> None:  # noqa: ANN001
    first = ask(appliance, staff, "How many days of annual leave do full-time employees get?")
    conv = first[-1].conversation_id
    # a topic change retrieves the new topic's document first, as a first question would
    vpn = ask(appliance, staff, "How do I reset my VPN password?", conv)
    assert vpn[0].citations[0].source == "it-vpn-access.md"
    # a follow-up that leans on the conversation carries its subject
    staffed = ask(appliance, staff, "What is the IT helpdesk phone extension?")
    hours = ask(appliance, staff, "What hours is it staffed?", staffed[-1].conversation_id)
    assert hours[0].citations[0].source == "it-helpdesk.txt"
