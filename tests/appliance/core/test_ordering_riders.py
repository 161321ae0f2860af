"""Cache riders through the real chat service (sample corpus, embedded engine, SQLite): a first
turn takes lower-ranked chunks that lie on the cached path along, numbered and cited; a later
turn that retrieves one of them renders nothing new."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from appliance.core.db.models import Message
from appliance.core.services.chat import ChatService, DoneEvent, RetrievalEvent
from appliance.core.services.settings import MAX_RIDERS, ChatSettings, SettingsError, apply_changes
from rag.ordering import default_ordering

QUESTION = "How do I reset my VPN password?"


def turn(chat: ChatService, user, question: str, conv: int | None = None) -> list:  # noqa: ANN001
    events = list(chat.ask(user, question, conv))
    assert isinstance(events[0], RetrievalEvent) and isinstance(events[-1], DoneEvent), events
    return events


def prompt_text(appliance, conversation_id: int) -> list[str]:  # noqa: ANN001
    """The user messages of a conversation as they were in the prompt."""
    with appliance.db.session() as s:
        rows = s.scalars(
            select(Message)
            .where(Message.conversation_id == conversation_id, Message.role == "user")
            .order_by(Message.id)
        )
        return [m.prompt_text for m in rows]


def fresh_chat(appliance) -> ChatService:  # noqa: ANN001
    """A chat service of its own, so that its cache shadow starts empty."""
    return ChatService(
        appliance.db,
        appliance.knowledge,
        appliance.engine,
        appliance.config.chat,
        appliance.settings,
        default_ordering(appliance.config.engine.kv_budget_tokens),
    )


def test_a_later_turn_about_a_rider_chunk_adds_no_new_chunk(appliance) -> None:  # noqa: ANN001
    chat = fresh_chat(appliance)
    a = appliance.auth.create_user("staff-riders-a", "password-123", role="staff")
    b = appliance.auth.create_user("staff-riders-b", "password-123", role="staff")
    keys = ("top_k", "riders", "ordering")
    before = appliance.settings.current()
    try:
        # A asks with the top 4: the engine (and the shadow) now hold those four chunks
        appliance.settings.update("admin", {"top_k": 4, "riders": 0, "ordering": "prefix"})
        first = turn(chat, a, QUESTION)[0].citations
        assert len(first) == 4 and not any(c.rider for c in first)
        # B asks the same with the top 1 and 3 candidates: ranks 2-4 lie on A's cached path
        appliance.settings.update("admin", {"top_k": 1, "riders": 3})
        events = turn(chat, b, QUESTION)
        cites, done = events[0].citations, events[-1]
        assert [c.rider for c in cites] == [False, True, True, True]
        assert {c.chunk_id for c in cites} == {c.chunk_id for c in first}
        assert cites[0].chunk_id == first[0].chunk_id  # the required chunk: always there
        assert done.stats.cached_tokens >= done.stats.prompt_tokens - 80  # riders cost no prefill
        [text] = prompt_text(appliance, done.conversation_id)
        hint = text[text.index("Most relevant documents:") :]
        assert hint.startswith(f"Most relevant documents: [{cites[0].number}]\n")
        numbers = {c.chunk_id: c.number for c in cites}
        # a follow-up whose top-1 is a rider chunk: already in the conversation, nothing new
        rider = next(
            c
            for c in cites[1:]
            if appliance.knowledge.retrieve(c.text[:300], 1)[0][0].chunk_id == c.chunk_id
        )
        later = turn(chat, b, rider.text[:300], done.conversation_id)
        assert later[0].citations[0].chunk_id == rider.chunk_id
        assert later[0].citations[0].number == numbers[rider.chunk_id]
        assert all(c.chunk_id in numbers for c in later[0].citations)  # no new chunk
        texts = prompt_text(appliance, done.conversation_id)
        assert texts[0] == text and "Documents:" not in texts[1]
        assert f"Most relevant documents: [{rider.number}]" in texts[1]
    finally:
        appliance.settings.update("admin", {k: getattr(before, k) for k in keys})


def test_the_rider_setting_is_validated() -> None:
    defaults = ChatSettings("system", 4, "prefix", 0.0, 64)
    assert defaults.riders == 6  # on by default, like ``rag.riders``
    assert apply_changes(defaults, {"riders": "0"}, ["prefix"], 64).riders == 0
    for bad in (-1, MAX_RIDERS + 1, "some"):
        with pytest.raises(SettingsError, match="riders"):
            apply_changes(defaults, {"riders": bad}, ["prefix"], 64)


def test_only_strategies_that_take_riders_get_candidates_retrieved() -> None:
    ordering = default_ordering()
    assert ordering.takes_riders("prefix")
    assert not any(ordering.takes_riders(n) for n in ordering.names() if n != "prefix")
    assert not ordering.takes_riders("nope")


def test_riders_are_dropped_first_when_the_prompt_would_not_fit(appliance) -> None:  # noqa: ANN001
    """Riders are extras: a turn that fits without them is never refused because of them."""
    from dataclasses import replace

    chat = fresh_chat(appliance)
    a = appliance.auth.create_user("staff-riders-fit-a", "password-123", role="staff")
    b = appliance.auth.create_user("staff-riders-fit-b", "password-123", role="staff")
    before = appliance.settings.current()
    try:
        appliance.settings.update("admin", {"top_k": 4, "riders": 0, "ordering": "prefix"})
        turn(chat, a, QUESTION)  # the engine and the shadow now hold the top 4
    finally:
        appliance.settings.update("admin", {k: getattr(before, k) for k in ("top_k", "riders")})
    engine = appliance.engine

    def prompt_tokens(prepared) -> int:  # noqa: ANN001
        return engine.count_tokens(engine.render_chat(prepared.messages))

    wide = replace(before, top_k=1, riders=3, ordering="prefix")
    with_riders = chat.prompts.prepare(b, QUESTION, None, [], wide)
    assert sum(c.rider for c in with_riders.citations) == 3
    without = chat.prompts.prepare(b, QUESTION, None, [], replace(wide, riders=0))
    assert prompt_tokens(without) < prompt_tokens(with_riders) - 1
    # room for the prompt without riders, not with them: the riders go, the turn stays
    context = engine.info().context_length
    tight = replace(wide, max_new_tokens=context - prompt_tokens(with_riders) + 1)
    fitted = chat.prompts.prepare(b, QUESTION, None, [], tight)
    assert [c.rider for c in fitted.citations] == [False]
    assert prompt_tokens(fitted) == prompt_tokens(without)
