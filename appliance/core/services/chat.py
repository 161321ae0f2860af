"""One chat turn: retrieve, assemble a prefix-stable prompt, stream from the engine, store.

A turn is stored (question and answer together, in one transaction) only once the engine has
finished or the reader has gone away; an engine error stores nothing, so the caller can offer
the same question again and the conversation never holds half a turn.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from sqlalchemy import delete
from sqlalchemy.orm import Session

from appliance.core.auth.principal import Principal
from appliance.core.config import ChatConfig
from appliance.core.db.models import Conversation, Message
from appliance.core.db.session import Database
from appliance.core.errors import ChatError, ErrorKind, engine_kind
from appliance.core.metrics import AppMetrics
from appliance.core.services.knowledge import KnowledgeBase
from appliance.core.services.settings import SettingsService
from appliance.core.services.turn_prompt import PreparedTurn, StoredMessage, TurnPrompts
from engine.base import (
    Engine,
    EngineError,
    Finished,
    GenerateRequest,
    GenerationStats,
    SamplingParams,
    TextDelta,
)
from rag.ordering import ContextOrdering
from rag.prompt import Citation
from rag.prompt_keys import answer_key, tail_key

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetrievalEvent:
    citations: list[Citation]
    retrieval_ms: float


@dataclass(frozen=True)
class DeltaEvent:
    text: str


@dataclass(frozen=True)
class DoneEvent:
    conversation_id: int
    message_id: int
    answer: str
    stats: GenerationStats
    retrieval_ms: float


@dataclass(frozen=True)
class ErrorEvent:
    kind: ErrorKind
    message: str


ChatEvent = RetrievalEvent | DeltaEvent | DoneEvent | ErrorEvent


def owned_conversation(s: Session, principal: Principal, conversation_id: int) -> Conversation:
    """The conversation if ``principal`` owns it; else ``not_found`` - the same answer for
    "missing" and "someone else's", so ids leak nothing."""
    conv = s.get(Conversation, conversation_id)
    if conv is None or conv.user_id != principal.user_id:
        raise ChatError("not_found", f"conversation {conversation_id} not found")
    return conv


class ChatService:
    """Chat turns: ask, regenerate, and the pipeline between (retrieve, assemble, stream,
    store). Reading and editing stored conversations is ``ConversationService``'s."""

    def __init__(
        self,
        db: Database,
        knowledge: KnowledgeBase,
        engine: Engine,
        chat: ChatConfig,
        settings: SettingsService,
        ordering: ContextOrdering,
        metrics: AppMetrics | None = None,
    ) -> None:
        # the app's Prometheus metrics: retrieval latency, turns, errors by kind
        self.metrics = metrics
        self.db = db
        self.engine = engine
        self.cfg = chat
        # read on every turn: admin changes apply to the next turn without a restart
        self.settings = settings
        self.ordering = ordering
        self.prompts = TurnPrompts(knowledge, engine, ordering, chat.history_turns)

    # ---- a turn ---------------------------------------------------------------------------

    def ask(
        self, principal: Principal, question: str, conversation_id: int | None = None
    ) -> Iterator[ChatEvent]:
        """Validate and start a turn (raising ``ChatError`` before any work on bad input),
        then return the stream of events."""
        question = question.strip()
        refusal = None
        if not question:
            refusal = ChatError("empty", "the question is empty")
        elif len(question) > self.cfg.max_prompt_chars:
            refusal = ChatError(
                "too_long",
                f"the question is {len(question)} characters; the limit is "
                f"{self.cfg.max_prompt_chars}",
            )
        if refusal is not None:
            if self.metrics is not None:
                self.metrics.error(refusal.kind)
            raise refusal
        return self._start(principal, question, conversation_id)

    def _start(
        self,
        principal: Principal,
        question: str,
        conversation_id: int | None,
        replace_ids: tuple[int, ...] = (),
    ) -> Iterator[ChatEvent]:
        """Retrieve, assemble and submit; a refusal (busy, too long, down) is a ``ChatError``
        raised here, before anything is stored."""
        try:
            # retrieval and prompt assembly ask the engine (context length, token counts)
            stored: list[StoredMessage] = []
            if conversation_id is not None:
                with self.db.session() as s:
                    stored = self._history(owned_conversation(s, principal, conversation_id))
            if replace_ids:  # regenerate: the turn being replaced is not in the prompt
                stored = stored[:-2]
            prepared = self.prompts.prepare(
                principal, question, conversation_id, stored, self.settings.current()
            )
            sampling = SamplingParams(
                max_new_tokens=prepared.settings.max_new_tokens,
                temperature=prepared.settings.temperature,
                top_p=self.cfg.top_p,
            )
            stream = self.engine.generate(
                GenerateRequest(messages=prepared.messages, sampling=sampling)
            )
        except EngineError as exc:
            if self.metrics is not None:
                self.metrics.turn_failed(engine_kind(exc))
            raise ChatError.from_engine(exc) from exc
        return self._run(principal, question, prepared, stream, replace_ids)

    @staticmethod
    def _history(conv: Conversation) -> list[StoredMessage]:
        """(role, text as it was in the prompt, citations) per stored message."""
        return [
            ("user", m.prompt_text or m.content, [])
            if m.role == "user"
            else ("assistant", m.content, m.citations or [])
            for m in conv.messages
        ]

    def _run(
        self,
        principal: Principal,
        question: str,
        prepared: PreparedTurn,
        stream: Iterator,
        replace_ids: tuple[int, ...] = (),
    ) -> Iterator[ChatEvent]:
        if self.metrics is not None:
            self.metrics.observe_retrieval(prepared.retrieval_ms)
        yield RetrievalEvent(prepared.citations, prepared.retrieval_ms)
        parts: list[str] = []
        stats: GenerationStats | None = None
        try:
            for item in stream:
                if isinstance(item, TextDelta):
                    parts.append(item.text)
                    yield DeltaEvent(item.text)
                elif isinstance(item, Finished):
                    stats = item.stats
        except EngineError as exc:
            if self.metrics is not None:
                self.metrics.turn_failed(engine_kind(exc))
            yield ErrorEvent(engine_kind(exc), f"The engine failed to answer: {exc}")
            return
        finally:
            if stats is None:
                stream.close()  # the reader left or the engine failed: cancel generation
        answer = "".join(parts)
        self.ordering.observe(
            prepared.prefix,
            prepared.sent_chunk_ids,
            stats.prompt_tokens,
            stats.cached_tokens,
            prepared.page_tokens,
            tail=tail_key(prepared.user_turn),
            answer=answer_key(answer),
            completion_tokens=stats.completion_tokens,
        )
        conv_id, msg_id = self._store(principal, question, prepared, answer, stats, replace_ids)
        if self.metrics is not None:
            self.metrics.turn_done(stats)
        yield DoneEvent(conv_id, msg_id, answer, stats, prepared.retrieval_ms)

    def _store(
        self,
        principal: Principal,
        question: str,
        prepared: PreparedTurn,
        answer: str,
        stats: GenerationStats,
        replace_ids: tuple[int, ...] = (),
    ) -> tuple[int, int]:
        """Store the turn; for a regenerated answer, delete the turn it replaces in the same
        transaction (the conversation never holds both, nor neither)."""
        now = datetime.now(UTC)
        with self.db.session() as s:
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
                    prompt_text=prepared.user_turn,
                )
            )
            reply = Message(
                conversation_id=conv.id,
                role="assistant",
                content=answer,
                citations=[asdict(c) for c in prepared.citations],
                finish_reason=stats.finish_reason,
                prompt_tokens=stats.prompt_tokens,
                cached_tokens=stats.cached_tokens,
                completion_tokens=stats.completion_tokens,
                ttft_ms=stats.ttft_s * 1000,
                e2e_ms=stats.e2e_s * 1000,
                retrieval_ms=prepared.retrieval_ms,
                ordering=prepared.settings.ordering,
            )
            s.add(reply)
            s.flush()
            if replace_ids:  # after the insert, so the new turn never reuses the old ids
                s.execute(delete(Message).where(Message.id.in_(replace_ids)))
            return conv.id, reply.id

    # ---- regenerate -----------------------------------------------------------------------

    def regenerate(self, principal: Principal, conversation_id: int) -> Iterator[ChatEvent]:
        """Ask a conversation's last question again, with the prompt built as it was before
        that turn. The old turn is replaced in the transaction that stores the new one, so an
        engine failure or a stop leaves the conversation exactly as it was."""
        with self.db.session() as s:
            last = owned_conversation(s, principal, conversation_id).messages[-2:]
            if len(last) < 2 or [m.role for m in last] != ["user", "assistant"]:
                raise ChatError("empty", "this conversation has no answer to regenerate")
            question, old_ids = last[0].content, tuple(m.id for m in last)
        return self._start(principal, question, conversation_id, replace_ids=old_ids)
