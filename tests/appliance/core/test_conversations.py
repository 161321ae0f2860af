"""Conversations through the real services: typed turns with their metrics, rename, delete,
feedback, and regenerate (which replaces the last turn only once the new one is stored)."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from support.servers import free_port

from appliance.core.db.models import Feedback
from appliance.core.errors import ChatError
from appliance.core.services.chat import ChatService, DoneEvent
from appliance.core.services.conversations import ConversationService
from engine.sglang.client import SGLangEngine


@pytest.fixture(scope="module")
def convs(appliance) -> ConversationService:  # noqa: ANN001
    return ConversationService(appliance.db, appliance.chat)


@pytest.fixture(scope="module")
def users(appliance):  # noqa: ANN001, ANN201
    return (
        appliance.auth.create_user("conv-owner", "password-123"),
        appliance.auth.create_user("conv-other", "password-123"),
    )


def done(events) -> DoneEvent:  # noqa: ANN001
    last = list(events)[-1]
    assert isinstance(last, DoneEvent), last
    return last


def test_turns_rename_feedback_regenerate_delete(convs: ConversationService, users) -> None:  # noqa: ANN001
    owner, other = users
    first = done(convs.ask(owner, "How do I reset my VPN password?"))
    conv = first.conversation_id
    turns = convs.turns(owner, conv)
    assert [t.question for t in turns] == ["How do I reset my VPN password?"]
    stats = turns[0].stats
    assert stats.prompt_tokens > 0 and stats.ttft_ms > 0 and stats.ordering
    assert 0 <= stats.hit_pct <= 100 and stats.inter_token_ms >= 0
    assert turns[0].citations[0]["source"] == "it-vpn-access.md"

    assert convs.rename(owner, conv, "  VPN   help ") == "VPN help"
    listed = convs.list(owner)[0]
    assert (listed.id, listed.title) == (conv, "VPN help")
    assert [m.role for m in convs.messages(owner, conv)] == ["user", "assistant"]
    assert convs.messages(owner, conv)[1].id == first.message_id
    with pytest.raises(ChatError):
        convs.rename(other, conv, "mine now")
    with pytest.raises(ChatError):
        convs.rename(owner, conv, "   ")

    convs.feedback(owner, first.message_id, -1, "too short")
    convs.feedback(owner, first.message_id, 1)  # changes the rating, keeps the comment
    assert convs.feedback_of(owner, first.message_id) == (1, "too short")
    assert convs.turns(owner, conv)[0].rating == 1
    with pytest.raises(ChatError):
        convs.feedback(other, first.message_id, 1)  # not their answer
    with pytest.raises(ChatError):
        convs.feedback(owner, first.message_id, 5)

    again = done(convs.regenerate(owner, conv))
    turns = convs.turns(owner, conv)
    assert len(turns) == 1 and turns[0].message_id == again.message_id != first.message_id
    assert turns[0].question == "How do I reset my VPN password?"
    with pytest.raises(ChatError):
        convs.regenerate(other, conv)

    convs.delete(owner, conv)
    assert conv not in [c.id for c in convs.list(owner)]
    with convs.db.session() as s:  # the answer's feedback went with it
        assert (
            s.scalars(select(Feedback).where(Feedback.message_id == first.message_id)).all() == []
        )
    with pytest.raises(ChatError):
        convs.turns(owner, conv)


def test_engine_down_loses_nothing(appliance, convs: ConversationService, users, model_dir) -> None:  # noqa: ANN001
    """A real SGLang client pointed at a port where nothing listens: asking and regenerating
    fail with a clear 'unavailable', and the stored conversation is untouched."""
    owner, _other = users
    conv = done(convs.ask(owner, "How many days of annual leave do I get?")).conversation_id
    before = convs.turns(owner, conv)
    dead = SGLangEngine(
        f"http://127.0.0.1:{free_port()}", tokenizer=str(model_dir), connect_retries=0
    )
    chat = appliance.chat
    down = ConversationService(
        appliance.db,
        ChatService(
            appliance.db, appliance.knowledge, dead, chat.cfg, chat.settings, chat.ordering
        ),
    )
    try:
        with pytest.raises(ChatError) as asked:
            down.ask(owner, "And sick leave?", conv)
        assert asked.value.kind == "unavailable"
        with pytest.raises(ChatError) as regenerated:
            down.regenerate(owner, conv)
        assert regenerated.value.kind == "unavailable"
    finally:
        dead.close()
    assert convs.turns(owner, conv) == before
