"""A user's conversations: the list, the stored messages, typed turns with their metrics,
rename, delete, feedback, and the entry points for asking, regenerating and continuing that the
chat page and the APIs share (the turn itself is ``ChatService``'s).

Every method takes the ``Principal`` and touches only that user's rows; someone else's id
reads as "not found", exactly as a missing one, so ids leak nothing (not even the
conversation another user's answer is in).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import select

from appliance.core.auth.principal import Principal
from appliance.core.db.models import AuditEvent, Conversation, Feedback, Message
from appliance.core.db.session import Database
from appliance.core.errors import ChatError
from appliance.core.services.chat import ChatEvent, ChatService, owned_conversation
from appliance.core.services.grounding import AnswerMode
from appliance.core.services.turn_access import Readable, ShownAnswer, shown_answer
from appliance.core.text import is_blank, without_controls
from engine.base import EngineError

MAX_TITLE = 200
MAX_COMMENT = 2000
# conversations checked turn by turn when matching a client-sent history
MAX_HISTORY_CANDIDATES = 20


@dataclass(frozen=True)
class ConversationSummary:
    """One entry of a user's conversation list."""

    id: int
    title: str
    updated_at: datetime


@dataclass(frozen=True)
class ConversationMessage:
    """One stored message (a question or an answer) with what was measured for it; the
    measures are None on questions."""

    id: int
    role: str  # "user" or "assistant"
    content: str
    citations: list[dict]
    finish_reason: str | None
    prompt_tokens: int | None
    cached_tokens: int | None
    completion_tokens: int | None
    ttft_ms: float | None
    e2e_ms: float | None
    retrieval_ms: float | None
    # answers: the evidence card, the verdicts (``appliance.api.grounded`` shapes), the mode
    evidence: list[dict] = field(default_factory=list)
    verification: dict | None = None
    answer_mode: str | None = None


@dataclass(frozen=True)
class TurnStats:
    """What the per-answer panel shows; times in milliseconds."""

    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    ttft_ms: float
    e2e_ms: float
    retrieval_ms: float
    ordering: str | None
    # the prompt layout sent, and the cached tokens the cache shadow predicted for it (None:
    # a turn stored before they were recorded)
    layout: str | None = None
    predicted_cached: int | None = None

    @property
    def hit_pct(self) -> float:
        return 100.0 * self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def decode_ms(self) -> float:
        return max(0.0, self.e2e_ms - self.ttft_ms)

    @property
    def tokens_per_s(self) -> float:
        n = self.completion_tokens - 1
        return 1000.0 * n / self.decode_ms if n > 0 and self.decode_ms > 0 else 0.0

    @property
    def inter_token_ms(self) -> float:
        n = self.completion_tokens - 1
        return self.decode_ms / n if n > 0 else 0.0


@dataclass(frozen=True)
class Turn:
    """One question and its stored answer."""

    question: str
    answer: str
    message_id: int  # the assistant message (feedback targets it)
    citations: list[dict]
    stats: TurnStats
    rating: int | None  # this user's thumbs: +1, -1 or None
    # why the answer ended: "length" when the limit cut it (the chat offers Continue)
    finish_reason: str | None = None
    # grounding: the evidence card, each sentence's verdict, the mode that answered
    evidence: list[dict] = field(default_factory=list)
    verification: dict | None = None
    answer_mode: str | None = None


def _stats(m: Message) -> TurnStats:
    return TurnStats(
        m.prompt_tokens or 0,
        m.cached_tokens or 0,
        m.completion_tokens or 0,
        m.ttft_ms or 0.0,
        m.e2e_ms or 0.0,
        m.retrieval_ms or 0.0,
        m.ordering,
        m.layout,
        m.predicted_cached,
    )


def _verification(m: Message) -> dict | None:
    """The stored verdicts as the APIs show them (``appliance.api.grounded``)."""
    if not m.verdicts:
        return None
    return {
        "supported": m.claims_supported or 0,
        "total": m.claims_total or 0,
        "sentences": list(m.verdicts.get("verdicts", [])),
        "bad_markers": list(m.verdicts.get("bad_markers", [])),
    }


def _shown(question: str, m: Message, readable: Readable) -> ShownAnswer:
    """An answer as its reader may see it now (``turn_access``)."""
    return shown_answer(
        question, m.content, m.answer_mode, m.citations or [], m.evidence or [], readable
    )


def _stored(m: Message, shown: ShownAnswer | None) -> ConversationMessage:
    """A stored message; an answer as ``shown``."""
    return ConversationMessage(
        m.id,
        m.role,
        shown.content if shown else m.content,
        shown.citations if shown else [],
        m.finish_reason,
        m.prompt_tokens,
        m.cached_tokens,
        m.completion_tokens,
        m.ttft_ms,
        m.e2e_ms,
        m.retrieval_ms,
        shown.evidence if shown else [],
        _verification(m) if shown and shown.verdicts_apply else None,
        m.answer_mode,
    )


def engine_errors_as_chat_errors(start: Callable[[], Iterator[ChatEvent]]) -> Iterator[ChatEvent]:
    """Run ``start()``; an engine that is down before the turn starts (for example the SGLang
    server not answering ``info``) becomes a ``ChatError`` like every other refusal."""
    try:
        return start()
    except EngineError as exc:
        raise ChatError.from_engine(exc) from exc


class ConversationService:
    """One user's conversations, read and changed; asking goes through to ``ChatService``."""

    def __init__(self, db: Database, chat: ChatService) -> None:
        self.db = db
        self.chat = chat

    # ---- reading --------------------------------------------------------------------------

    def list(self, principal: Principal) -> list[ConversationSummary]:
        """The user's conversations, most recently used first."""
        with self.db.session() as s:
            rows = s.scalars(
                select(Conversation)
                .where(Conversation.user_id == principal.user_id)
                .order_by(Conversation.updated_at.desc(), Conversation.id.desc())
            ).all()
            return [ConversationSummary(c.id, c.title, c.updated_at) for c in rows]

    def _readable(self, principal: Principal) -> Readable:
        return self.chat.knowledge.readable(principal.allowed_collections)

    def messages(self, principal: Principal, conversation_id: int) -> list[ConversationMessage]:
        """The conversation's messages in order (questions and answers); ``not_found`` unless
        the user owns it. An answer shows no text of a chunk the user may no longer read."""
        readable = self._readable(principal)
        out: list[ConversationMessage] = []
        question = ""
        with self.db.session() as s:
            for m in owned_conversation(s, principal, conversation_id).messages:
                if m.role == "user":
                    question = m.content
                shown = _shown(question, m, readable) if m.role == "assistant" else None
                out.append(_stored(m, shown))
        return out

    def turns(self, principal: Principal, conversation_id: int) -> list[Turn]:
        """The conversation as question-and-answer turns, with this user's ratings; an answer
        shows no text of a chunk the user may no longer read."""
        readable = self._readable(principal)
        with self.db.session() as s:
            conv = owned_conversation(s, principal, conversation_id)
            ratings = dict(
                s.execute(
                    select(Feedback.message_id, Feedback.rating)
                    .join(Message, Message.id == Feedback.message_id)
                    .where(
                        Message.conversation_id == conv.id,
                        Feedback.user_id == principal.user_id,
                    )
                ).all()
            )
            out: list[Turn] = []
            pending: Message | None = None
            for m in conv.messages:
                if m.role == "user":
                    pending = m
                elif pending is not None:
                    shown = _shown(pending.content, m, readable)
                    out.append(
                        Turn(
                            pending.content,
                            shown.content,
                            m.id,
                            shown.citations,
                            _stats(m),
                            ratings.get(m.id),
                            m.finish_reason,
                            shown.evidence,
                            _verification(m) if shown.verdicts_apply else None,
                            m.answer_mode,
                        )
                    )
                    pending = None
            return out

    def find_by_history(self, principal: Principal, history: list[tuple[str, str]]) -> int | None:
        """The user's most recent conversation whose turns are exactly ``history`` (question,
        answer pairs, compared without surrounding whitespace), or None. Lets a client that
        resends the whole chat each call (the usual OpenAI pattern) continue its conversation.
        """
        if not history:
            return None
        last_answer = history[-1][1].strip()
        with self.db.session() as s:
            # candidates: conversations whose stored answers include the last one (a short list)
            candidates = s.scalars(
                select(Message.conversation_id)
                .join(Conversation, Conversation.id == Message.conversation_id)
                .where(
                    Conversation.user_id == principal.user_id,
                    Message.role == "assistant",
                    Message.content.in_([last_answer, history[-1][1]]),
                )
                .order_by(Message.id.desc())
                .limit(MAX_HISTORY_CANDIDATES)
            ).all()
        want = [(q.strip(), a.strip()) for q, a in history]
        for conv_id in dict.fromkeys(candidates):  # most recent first, each once
            turns = self.turns(principal, conv_id)
            if [(t.question.strip(), t.answer.strip()) for t in turns] == want:
                return conv_id
        return None

    # ---- changing -------------------------------------------------------------------------

    def rename(self, principal: Principal, conversation_id: int, title: str) -> str:
        title = " ".join(without_controls(title).split())
        if is_blank(title):
            raise ChatError("empty", "the new name is empty")
        if len(title) > MAX_TITLE:
            raise ChatError("too_long", f"a name has at most {MAX_TITLE} characters")
        with self.db.session() as s:
            owned_conversation(s, principal, conversation_id).title = title
        return title

    def delete(self, principal: Principal, conversation_id: int) -> None:
        """Delete a conversation with its messages and their feedback; audited."""
        with self.db.session() as s:
            conv = owned_conversation(s, principal, conversation_id)
            s.delete(conv)
            s.add(
                AuditEvent(
                    actor=principal.username,
                    action="conversation.delete",
                    detail={"id": conversation_id},
                )
            )

    def feedback(
        self, principal: Principal, message_id: int, rating: int, comment: str | None = None
    ) -> None:
        """Thumbs up (+1) or down (-1) on one of the user's answers, with an optional comment.
        One per user and answer: a second call replaces the rating (and the comment, if given).
        """
        if rating not in (1, -1):
            raise ChatError("invalid", "rating must be 1 (up) or -1 (down)")
        comment = without_controls(comment or "").strip() or None
        if comment and len(comment) > MAX_COMMENT:
            raise ChatError("too_long", f"a comment has at most {MAX_COMMENT} characters")
        with self.db.session() as s:
            msg = s.get(Message, message_id)
            conv = s.get(Conversation, msg.conversation_id) if msg is not None else None
            if conv is None or msg.role != "assistant" or conv.user_id != principal.user_id:
                # someone else's answer reads as a missing one (their conversation unnamed)
                raise ChatError("not_found", f"answer {message_id} not found")
            row = s.scalar(
                select(Feedback).where(
                    Feedback.message_id == message_id, Feedback.user_id == principal.user_id
                )
            )
            if row is None:
                s.add(
                    Feedback(
                        message_id=message_id,
                        user_id=principal.user_id,
                        rating=rating,
                        comment=comment,
                    )
                )
            else:
                row.rating = rating
                row.created_at = datetime.now(UTC)
                if comment is not None:
                    row.comment = comment

    def feedback_of(self, principal: Principal, message_id: int) -> tuple[int, str | None] | None:
        """The user's (rating, comment) on an answer, or None."""
        with self.db.session() as s:
            row = s.scalar(
                select(Feedback).where(
                    Feedback.message_id == message_id, Feedback.user_id == principal.user_id
                )
            )
            return (row.rating, row.comment) if row else None

    # ---- turns ----------------------------------------------------------------------------

    def ask(
        self, principal: Principal, question: str, conversation_id: int | None = None
    ) -> Iterator[ChatEvent]:
        """``ChatService.ask``, with an engine that is down reported as a ``ChatError``."""
        return engine_errors_as_chat_errors(
            lambda: self.chat.ask(principal, question, conversation_id)
        )

    def regenerate(
        self,
        principal: Principal,
        conversation_id: int,
        answer_mode: AnswerMode | None = None,
    ) -> Iterator[ChatEvent]:
        """Replace the last answer with a new one, in ``answer_mode`` if given (see
        ``ChatService.regenerate``)."""
        return engine_errors_as_chat_errors(
            lambda: self.chat.regenerate(principal, conversation_id, answer_mode)
        )

    def continue_answer(self, principal: Principal, conversation_id: int) -> Iterator[ChatEvent]:
        """Go on with a last answer the length limit cut (see ``ChatService.continue_answer``)."""
        return engine_errors_as_chat_errors(
            lambda: self.chat.continue_answer(principal, conversation_id)
        )
