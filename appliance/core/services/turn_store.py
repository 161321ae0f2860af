"""Storing a turn: the question and the answer with its measures, its evidence card and its
verdicts, in one transaction (``ChatService`` calls it once the answer is complete)."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime

from sqlalchemy import delete

from appliance.core.auth.principal import Principal
from appliance.core.db.models import Conversation, Message
from appliance.core.db.session import Database
from appliance.core.errors import ChatError
from appliance.core.services.grounding import TurnGrounding, stored_verdicts
from appliance.core.services.turn_history import parts_of
from appliance.core.services.turn_prompt import PreparedTurn
from engine.base import GenerationStats
from rag.verify import AnswerCheck


def owned_conversation(s, principal: Principal, conversation_id: int) -> Conversation:  # noqa: ANN001
    """The conversation if ``principal`` owns it; else ``not_found`` - the same answer for
    "missing" and "someone else's", so ids leak nothing."""
    conv = s.get(Conversation, conversation_id)
    if conv is None or conv.user_id != principal.user_id:
        raise ChatError("not_found", f"conversation {conversation_id} not found")
    return conv


def store_turn(
    db: Database,
    principal: Principal,
    question: str,
    prepared: PreparedTurn,
    answered: tuple[str, GenerationStats, str],
    grounding: TurnGrounding,
    result: AnswerCheck,
    replace_ids: tuple[int, ...] = (),
) -> tuple[int, int]:
    """Store the turn (a new conversation for the first one); for a regenerated answer,
    delete the turn it replaces in the same transaction (the conversation never holds both,
    nor neither). Returns (conversation id, answer id)."""
    answer, stats, finish_reason = answered  # the text, the engine's stats, why it ended
    now = datetime.now(UTC)
    with db.session() as s:
        if prepared.conversation_id is None:
            conv = Conversation(user_id=principal.user_id, title=question[:80], updated_at=now)
            s.add(conv)
            s.flush()
        else:
            conv = owned_conversation(s, principal, prepared.conversation_id)
            conv.updated_at = now
        s.add(
            Message(
                conversation_id=conv.id,
                role="user",
                content=question,
                prompt_text=prepared.prompt.user,
                prompt_parts=parts_of(prepared.prompt.sent),
            )
        )
        checked = stored_verdicts(result)
        reply = Message(
            conversation_id=conv.id,
            role="assistant",
            content=answer,
            citations=[asdict(c) for c in prepared.citations],
            finish_reason=finish_reason,
            prompt_tokens=stats.prompt_tokens,
            cached_tokens=stats.cached_tokens,
            completion_tokens=stats.completion_tokens,
            ttft_ms=stats.ttft_s * 1000,
            e2e_ms=stats.e2e_s * 1000,
            retrieval_ms=prepared.retrieval_ms,
            ordering=prepared.settings.ordering,
            layout=prepared.layout,
            predicted_cached=prepared.predicted_cached,
            evidence=[asdict(c) for c in grounding.card],
            verdicts=checked,
            answer_mode=grounding.mode,
            claims_total=checked["claims_total"],
            claims_supported=checked["claims_supported"],
        )
        s.add(reply)
        s.flush()
        if replace_ids:  # after the insert, so the new turn never reuses the old ids
            s.execute(delete(Message).where(Message.id.in_(replace_ids)))
        return conv.id, reply.id


def store_check(db: Database, message_id: int, result: AnswerCheck) -> None:
    """Replace a stored answer's verdicts (after a continuation grew it)."""
    checked = stored_verdicts(result)
    with db.session() as s:
        reply = s.get(Message, message_id)
        if reply is not None:
            reply.verdicts = checked
            reply.claims_total = checked["claims_total"]
            reply.claims_supported = checked["claims_supported"]
