"""Per-turn prompt layouts in the real chat (``rag.layout`` through ``ChatService``): a follow-up
whose history the engine no longer holds is re-laid (documents right after the system prompt,
the history without its documents), the next turn continues from the re-laid prompt as sent,
a re-laid answer cut at the length limit is continued from that prompt, and every layout is
stored with what the cache shadow predicted beside what the engine reported. The embedded
engine, SQLite and the sample corpus, for real."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import select

from appliance.core.db.models import Message
from appliance.core.services.chat import ChatService, DoneEvent, owned_conversation
from appliance.core.services.settings import SettingsError, apply_changes
from appliance.core.services.turn_history import stored_turns
from rag.layout import Conversation, rebuild
from rag.ordering.base import ContextOrdering
from rag.ordering.prefix import PrefixOrdering

LEAVE = "How many days of annual leave do I get?"
VPN = "How do I reset my VPN password?"
PHISHING = "What is the phishing report address?"


class Pinned:
    """The appliance's settings with some of them pinned for one test (the shared database's
    settings stay as other tests leave them)."""

    def __init__(self, inner: Any, **changes: Any) -> None:
        self.inner, self.changes = inner, changes

    def current(self) -> Any:
        return replace(self.inner.current(), **self.changes)


def chat_with(appliance: Any, **changes: Any) -> tuple[ChatService, PrefixOrdering]:  # noqa: ANN401
    """A chat service over the shared appliance with its own cache shadow and pinned settings."""
    ours = PrefixOrdering(appliance.config.engine.kv_budget_tokens)
    ordering = ContextOrdering({"prefix": ours}, observers=[ours])
    settings = Pinned(appliance.settings, ordering="prefix", riders=0, **changes)
    chat = ChatService(
        appliance.db,
        appliance.knowledge,
        appliance.engine,
        appliance.config.chat,
        settings,  # type: ignore[arg-type]
        ordering,
    )
    return chat, ours


def done_of(events: list) -> DoneEvent:
    assert isinstance(events[-1], DoneEvent), events[-1]
    return events[-1]


def stored(appliance: Any, user: Any, conv: int) -> list[Message]:  # noqa: ANN401
    with appliance.db.session() as s:
        owned_conversation(s, user, conv)
        return list(s.scalars(select(Message).where(Message.conversation_id == conv)))


def test_an_evicted_history_is_re_laid_and_the_next_turn_continues_from_it(appliance) -> None:  # noqa: ANN001
    chat, ours = chat_with(appliance, layout="adaptive")
    user = appliance.auth.create_user("staff-layout-adaptive", "password-123", role="staff")
    first = done_of(list(chat.ask(user, LEAVE)))
    conv = first.conversation_id
    # the engine evicts everything (as a busy cache would) and the shadow follows it
    appliance.engine.flush_cache()
    ours.shadow.clear()
    events = list(chat.ask(user, VPN, conv))
    second = done_of(events)
    rows = stored(appliance, user, conv)
    question, reply = rows[2], rows[3]
    # nothing of the history is held: re-laying sends fewer tokens, none of them cached
    assert reply.layout == "relay" and question.prompt_parts["layout"] == "relay"
    assert reply.predicted_cached == 0 and second.stats.cached_tokens <= 16
    docs = question.prompt_parts["docs"]
    assert docs.startswith("Documents:\n\n[") and "Question:" not in docs
    assert question.prompt_text == question.prompt_parts["short"]
    assert question.prompt_text.endswith(f"Question: {VPN}")
    # the leave documents of turn 1 are left out; the VPN ones are numbered after them, and the
    # answer's citations say the same numbers as the prompt
    first_numbers = {c["chunk_id"]: c["number"] for c in rows[1].citations}
    for c in events[0].citations:
        assert c.number == first_numbers.get(c.chunk_id, c.number)
        assert f"[{c.number}] {c.title}" in docs
    new = [c.number for c in events[0].citations if c.chunk_id not in first_numbers]
    assert new and min(new) > max(first_numbers.values())
    # the stored turn rebuilds the prompt exactly as it was sent
    turns = stored_turns_of(appliance, user, conv)
    before = Conversation.resume(appliance.settings.current().system_prompt, turns[:1])
    relaid = rebuild(before, turns[1][0])
    assert relaid.messages[1] == ("user", docs) and relaid.messages[-1][1] == question.prompt_text
    assert [r for r, _t in relaid.messages] == ["system", "user", "user", "assistant", "user"]
    prompt = appliance.engine.render_chat(relaid.messages)
    assert appliance.engine.count_tokens(prompt) == second.stats.prompt_tokens

    # the third turn: the engine holds the re-laid prompt and its answer, so appending wins,
    # and the prompt goes on from the re-laid one token for token
    third = done_of(list(chat.ask(user, PHISHING, conv)))
    rows = stored(appliance, user, conv)
    assert rows[5].layout == "append"
    assert third.stats.cached_tokens >= second.stats.prompt_tokens - 1
    slack = max(32, third.stats.prompt_tokens // 20)
    assert abs(rows[5].predicted_cached - third.stats.cached_tokens) <= slack
    turns = stored_turns_of(appliance, user, conv)
    after = Conversation.resume(appliance.settings.current().system_prompt, turns[:2])
    appended = rebuild(after, turns[2][0])
    assert appended.messages[: len(relaid.messages)] == relaid.messages
    assert appended.messages[len(relaid.messages)] == ("assistant", second.answer)


def stored_turns_of(appliance: Any, user: Any, conv: int) -> list:  # noqa: ANN401
    with appliance.db.session() as s:
        return [(t.sent, t.answer) for t in stored_turns(owned_conversation(s, user, conv))]


def test_append_only_never_re_lays(appliance) -> None:  # noqa: ANN001
    chat, ours = chat_with(appliance, layout="append")
    user = appliance.auth.create_user("staff-layout-append", "password-123", role="staff")
    conv = done_of(list(chat.ask(user, LEAVE))).conversation_id
    ours.shadow.clear()
    done_of(list(chat.ask(user, VPN, conv)))
    rows = stored(appliance, user, conv)
    assert [m.layout for m in rows[1::2]] == ["append", "append"]
    # the follow-up renders its new documents in its own message, after the history
    assert rows[2].prompt_text.startswith("Documents:") and rows[2].prompt_parts["docs"] == ""


def test_a_re_laid_answer_cut_at_the_limit_is_continued_from_its_prompt(appliance) -> None:  # noqa: ANN001
    chat, _ours = chat_with(appliance, layout="relay", max_new_tokens=6, min_new_tokens=0)
    user = appliance.auth.create_user("staff-layout-continue", "password-123", role="staff")
    conv = done_of(list(chat.ask(user, LEAVE))).conversation_id
    cut = done_of(list(chat.ask(user, VPN, conv)))
    assert cut.stats.finish_reason == "length"
    rows = stored(appliance, user, conv)
    assert rows[3].layout == "relay"
    # the continuation's prompt is the re-laid prompt, then the answer so far: all cached
    more = done_of(list(chat.continue_answer(user, conv)))
    assert more.answer.startswith(cut.answer)  # (the small model may end there at once)
    assert more.stats.prompt_tokens > cut.stats.prompt_tokens
    assert more.stats.cached_tokens >= cut.stats.prompt_tokens - 1
    # a regenerated re-laid turn is laid out again after the turns before it
    again = done_of(list(chat.regenerate(user, conv)))
    rows = stored(appliance, user, conv)
    assert len(rows) == 4 and rows[3].content == again.answer and rows[3].layout == "relay"


def test_the_layout_is_a_setting_admins_can_switch(appliance) -> None:  # noqa: ANN001
    defaults = appliance.settings.defaults
    assert defaults.layout == appliance.config.rag.layout == "adaptive"
    strategies = appliance.ordering.names()
    for kind in ("append", "relay", "adaptive"):
        assert apply_changes(defaults, {"layout": kind}, strategies, 8192).layout == kind
    for bad in ("sideways", "", None, 3):
        with pytest.raises(SettingsError, match="layout"):
            apply_changes(defaults, {"layout": bad}, strategies, 8192)


def test_stored_turns_without_or_with_broken_parts_read_as_appended() -> None:
    from appliance.core.db.models import Conversation as StoredConversation

    cited = [{"chunk_id": 7, "number": 1, "title": "Doc", "section": "", "page": None}]
    cited[0] |= {"document_id": 1, "source": "d.md", "text": "Seven.", "rider": False}
    conv = StoredConversation(id=1, user_id=1)
    for parts in (None, {"layout": "relay", "chunks": [["x", 1]]}, {"layout": "sideways"}):
        conv.messages = [
            Message(role="user", content="Q?", prompt_text="Documents: ... Q?", prompt_parts=parts),
            Message(role="assistant", content="A [1].", citations=cited),
        ]
        [turn] = stored_turns(conv)
        assert turn.sent.kind == "append" and turn.sent.chunks == ((7, 1),)
        assert turn.sent.user == "Documents: ... Q?" and "Question: Q?" in turn.sent.short
