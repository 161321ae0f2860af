"""One chat turn: retrieve, assemble a prefix-stable prompt, show the evidence, stream from the
engine, check the answer against the sources, store.

A turn is stored (question and answer together, in one transaction) only once the engine has
finished or the reader has gone away; an engine error stores nothing, so the caller can offer
the same question again and the conversation never holds half a turn. The evidence card goes
out before the first generated token (it never waits for generation); the verdicts come with
the finished answer (``grounding``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Iterator
from dataclasses import replace

from appliance.core.auth.principal import Principal
from appliance.core.config import ChatConfig
from appliance.core.db.session import Database
from appliance.core.errors import ChatError, engine_kind
from appliance.core.metrics import AppMetrics
from appliance.core.services import grounding
from appliance.core.services.chat_events import (
    ChatEvent,
    DeltaEvent,
    DoneEvent,
    ErrorEvent,
    RetrievalEvent,
)
from appliance.core.services.continuation import (
    ContinuedTurn,
    continuation,
    cut_answer,
    observe_continued,
    store_continued,
)
from appliance.core.services.grounding import AnswerMode, CardSentence, TurnGrounding
from appliance.core.services.knowledge import KnowledgeBase
from appliance.core.services.question import question_refusal
from appliance.core.services.relay import Generation, Relayed, relay, start
from appliance.core.services.settings import SettingsService
from appliance.core.services.turn_access import withheld
from appliance.core.services.turn_history import StoredTurn, stored_turns
from appliance.core.services.turn_prompt import PreparedTurn, TurnPrompts
from appliance.core.services.turn_store import owned_conversation, store_check, store_turn
from appliance.core.text import without_controls
from engine.base import Engine, EngineError, GenerateRequest, GenerationStats
from rag.language import script_language
from rag.ordering import ContextOrdering
from rag.prompt_keys import answer_key
from rag.verify import AnswerCheck

log = logging.getLogger(__name__)

# the events are defined in ``chat_events`` and read from here by the API, UI and benches
__all__ = [
    "ChatEvent",
    "ChatService",
    "DeltaEvent",
    "DoneEvent",
    "ErrorEvent",
    "RetrievalEvent",
    "owned_conversation",
]


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
        model_languages: frozenset[str] | None = None,
    ) -> None:
        # the app's Prometheus metrics: retrieval latency, turns, errors by kind
        self.metrics = metrics
        # the languages the model writes (None: any); a question in another is answered with
        # the card and a notice, no generation (``grounding.writes``)
        self.model_languages = model_languages
        self.db = db
        self.engine = engine
        self.cfg = chat
        # read on every turn: admin changes apply to the next turn without a restart
        self.settings = settings
        self.ordering = ordering
        self.knowledge = knowledge
        self.prompts = TurnPrompts(knowledge, engine, ordering, chat.history_turns)

    # ---- a turn ---------------------------------------------------------------------------

    def ask(
        self, principal: Principal, question: str, conversation_id: int | None = None
    ) -> Iterator[ChatEvent]:
        """Validate and start a turn (raising ``ChatError`` before any work on bad input),
        then return the stream of events. A question that shows nothing (spaces, NUL,
        zero-width or other format characters only) is ``empty``; control characters are
        dropped from the question (``appliance.core.text``)."""
        question = without_controls(question).strip()
        refusal = question_refusal(question, self.cfg.max_prompt_chars)
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
        answer_mode: AnswerMode | None = None,
    ) -> Iterator[ChatEvent]:
        """Retrieve, assemble, pick the evidence and submit; a refusal (busy, too long, down)
        is a ``ChatError`` raised here, before anything is stored. ``answer_mode`` overrides
        the settings' for this turn ("Write an answer" after an extractive one)."""
        try:
            # retrieval and prompt assembly ask the engine (context length, token counts)
            stored: list[StoredTurn] = []
            if conversation_id is not None:
                with self.db.session() as s:
                    stored = stored_turns(owned_conversation(s, principal, conversation_id))
            if replace_ids:  # regenerate: the turn being replaced is not in the prompt
                stored = stored[:-1]
            prepared = self.prompts.prepare(
                principal, question, conversation_id, stored, self.settings.current()
            )
            if answer_mode is not None:
                prepared = replace(
                    prepared, settings=replace(prepared.settings, answer_mode=answer_mode)
                )
            language = script_language(question)
            if not grounding.writes(self.model_languages, language):
                # the model would write broken text in this language: the card, and a notice
                grounded = self._ground(question, prepared, stored, card_always=True)
                answer = grounding.cannot_write_answer(grounded.card, language)
                grounded = replace(grounded, mode="grounded")
                return self._extract(principal, question, prepared, grounded, replace_ids, answer)
            grounded = self._ground(question, prepared, stored)
            if grounded.mode == "extractive":  # the card is the answer: nothing to generate
                return self._extract(principal, question, prepared, grounded, replace_ids)
            request = GenerateRequest(
                messages=prepared.messages, sampling=prepared.settings.sampling(self.cfg.top_p)
            )
            running = start(self.engine, request, prepared.settings.stop_repeats)
        except EngineError as exc:
            if self.metrics is not None:
                self.metrics.turn_failed(engine_kind(exc))
            raise ChatError.from_engine(exc) from exc
        return self._run(principal, question, prepared, grounded, running, replace_ids)

    def _ground(
        self,
        question: str,
        prepared: PreparedTurn,
        stored: list[StoredTurn],
        card_always: bool = False,
    ) -> TurnGrounding:
        """The turn's answer mode, evidence card (``card_always``: in generative mode too) and
        the sources its answer is checked against (every citation the conversation has shown,
        this turn's retrieved texts)."""
        chosen = prepared.settings
        started = time.perf_counter()
        card: tuple[CardSentence, ...] = ()
        wanted = card_always or chosen.answer_mode != "generative"
        if wanted and chosen.evidence_sentences:
            spans = self.knowledge.evidence(question, prepared.sources, k=chosen.evidence_sentences)
            card = grounding.card(spans, prepared.citations)
        return TurnGrounding(
            chosen.answer_mode,
            card,
            grounding.sources_by_number(
                prepared.citations,
                [t.citations for at, t in enumerate(stored) if at not in prepared.withheld],
            ),
            tuple(c.text for c in prepared.sources),
            (time.perf_counter() - started) * 1000,
            question=question,
            embedder=self.knowledge.embedder,
            thresholds=grounding.support_thresholds(self.cfg),
        )

    def _relay(
        self, running: Generation, parts: list[str]
    ) -> Generator[ChatEvent, None, Relayed | None]:
        """The engine's text as ``DeltaEvent``s (collected into ``parts``), through the repeat
        guard (``relay``); returns how it ended, or None after an ``ErrorEvent`` (engine
        failure). When the reader leaves, generation is cancelled."""
        inner = relay(running.stream, parts, running.guard, lambda: self.engine.abort(running.rid))
        try:
            while True:
                yield DeltaEvent(next(inner))
        except StopIteration as end:
            return end.value
        except EngineError as exc:
            if self.metrics is not None:
                self.metrics.turn_failed(engine_kind(exc))
            yield ErrorEvent(engine_kind(exc), f"The engine failed to answer: {exc}")
            return None
        finally:
            inner.close()

    def _run(
        self,
        principal: Principal,
        question: str,
        prepared: PreparedTurn,
        grounded: TurnGrounding,
        running: Generation,
        replace_ids: tuple[int, ...] = (),
    ) -> Iterator[ChatEvent]:
        """Relay a started generation, then check and store the answer."""
        if self.metrics is not None:
            self.metrics.observe_retrieval(prepared.retrieval_ms)
        yield RetrievalEvent(
            prepared.citations, prepared.retrieval_ms, grounded.card, grounded.mode
        )
        parts: list[str] = []
        relayed = yield from self._relay(running, parts)
        if relayed is None:
            return
        stats, answer = relayed.stats, "".join(parts)
        sent = prepared.prompt
        self.ordering.observe(
            sent.prefix,
            sent.chunk_keys,
            stats.prompt_tokens,
            stats.cached_tokens,
            prepared.page_tokens,
            tail=sent.tail,
            answer=answer_key(answer),
            completion_tokens=stats.completion_tokens,
            worker=stats.worker,
            after=sent.after,
        )
        yield self._finish(principal, question, prepared, grounded, answer, relayed, replace_ids)

    def _extract(
        self,
        principal: Principal,
        question: str,
        prepared: PreparedTurn,
        grounded: TurnGrounding,
        replace_ids: tuple[int, ...],
        notice: str | None = None,
    ) -> Iterator[ChatEvent]:
        """A turn with no engine call: ``extractive`` (the card, verbatim, is the whole
        answer), or the card and ``notice`` (a question the model cannot answer in its
        language), which states nothing to check."""
        if self.metrics is not None:
            self.metrics.observe_retrieval(prepared.retrieval_ms)
        yield RetrievalEvent(
            prepared.citations, prepared.retrieval_ms, grounded.card, grounded.mode
        )
        answer = notice or grounding.extractive_answer(grounded.card, question)
        yield DeltaEvent(answer)
        took_s = grounded.evidence_ms / 1000
        stats = GenerationStats(0, 0, 0, took_s, took_s, "stop")
        checked = AnswerCheck((), ()) if notice else None
        yield self._finish(
            principal, question, prepared, grounded, answer, Relayed(stats), replace_ids, checked
        )

    def _finish(
        self,
        principal: Principal,
        question: str,
        prepared: PreparedTurn,
        grounded: TurnGrounding,
        answer: str,
        relayed: Relayed,
        replace_ids: tuple[int, ...],
        result: AnswerCheck | None = None,
    ) -> DoneEvent:
        """Check the answer against the sources (unless ``result`` is given), store the turn,
        count it."""
        stats = relayed.stats
        result = result if result is not None else grounding.check(answer, grounded)
        conv_id, msg_id = store_turn(
            self.db,
            principal,
            question,
            prepared,
            (answer, stats, relayed.finish),
            grounded,
            result,
            replace_ids,
        )
        if self.metrics is not None:
            # a turn with no engine call (extractive, or a notice) has no engine stats to count
            engine_stats = stats if stats.prompt_tokens else None
            self.metrics.turn_done(engine_stats, relayed.repeated)
            self._count_check(self.metrics, grounded.mode, result)
        return DoneEvent(
            conv_id, msg_id, answer, stats, prepared.retrieval_ms, result, relayed.repeated
        )

    def _count_check(self, metrics: AppMetrics, mode: str, result: AnswerCheck) -> None:
        facts = sum(len(v.unsupported_facts) for v in result.sentences)
        metrics.answer_checked(mode, result.supported, result.total - result.supported, facts)

    # ---- regenerate -----------------------------------------------------------------------

    def regenerate(
        self,
        principal: Principal,
        conversation_id: int,
        answer_mode: AnswerMode | None = None,
    ) -> Iterator[ChatEvent]:
        """Ask a conversation's last question again, with the prompt built as it was before
        that turn, in ``answer_mode`` (None: the settings'; "grounded" is "Write an answer"
        after an extractive one). The old turn is replaced in the transaction that stores the
        new one, so an engine failure or a stop leaves the conversation exactly as it was."""
        with self.db.session() as s:
            last = owned_conversation(s, principal, conversation_id).messages[-2:]
            if len(last) < 2 or [m.role for m in last] != ["user", "assistant"]:
                raise ChatError("empty", "this conversation has no answer to regenerate")
            question, old_ids = last[0].content, tuple(m.id for m in last)
        return self._start(
            principal, question, conversation_id, replace_ids=old_ids, answer_mode=answer_mode
        )

    # ---- continue -------------------------------------------------------------------------

    def continue_answer(self, principal: Principal, conversation_id: int) -> Iterator[ChatEvent]:
        """Go on with the conversation's last answer where the length limit cut it (see
        ``appliance.core.services.continuation``): the stream is that of a turn (the stored
        citations with ``retrieval_ms`` 0, the new text as deltas, then ``DoneEvent`` with the
        whole answer and this request's own stats), and the stored answer grows in place
        (``extend_answer`` says how its measures add up). A refusal (no cut answer, one whose
        documents the user may no longer read, busy, too long, down) is a ``ChatError`` raised
        here; a stop or an engine failure stores nothing, so the answer stays as it was."""
        try:
            with self.db.session() as s:
                conv = owned_conversation(s, principal, conversation_id)
                reply_id = cut_answer(conv).id
                stored = stored_turns(conv)
            chosen = self.settings.current()
            turn = continuation(
                self.engine,
                reply_id,
                stored,
                chosen.system_prompt,
                self.cfg.history_turns,
                chosen.max_new_tokens,
                withheld(stored, self.knowledge.readable(principal.allowed_collections)),
            )
            sampling = chosen.sampling(self.cfg.top_p)  # the same sampling as a turn's
            # what the answer already says counts as said: the continuation must not repeat it
            request = GenerateRequest(prompt=turn.prompt, sampling=sampling)
            running = start(self.engine, request, chosen.stop_repeats, said_before=turn.answer)
        except EngineError as exc:
            if self.metrics is not None:
                self.metrics.turn_failed(engine_kind(exc))
            raise ChatError.from_engine(exc) from exc
        return self._run_continued(conversation_id, turn, running)

    def _run_continued(
        self,
        conversation_id: int,
        turn: ContinuedTurn,
        running: Generation,
    ) -> Iterator[ChatEvent]:
        yield RetrievalEvent(turn.citations, 0.0)
        parts: list[str] = []
        relayed = yield from self._relay(running, parts)
        if relayed is None:
            return
        stats = relayed.stats
        grown = store_continued(self.db, turn, "".join(parts), stats, relayed.finish)
        if grown is None:  # regenerated, or continued by another request meanwhile
            yield ErrorEvent("invalid", "the answer changed while it was continued")
            return
        observe_continued(self.ordering, self.engine, turn, stats, grown)
        # the grown answer is checked again, against the sources the turn cited
        sources = {c.number: c.text for c in turn.citations}
        result = grounding.check(
            grown.content, TurnGrounding("generative", (), sources, tuple(sources.values()))
        )
        store_check(self.db, turn.message_id, result)
        if self.metrics is not None:
            self.metrics.turn_done(stats, relayed.repeated)
        yield DoneEvent(
            conversation_id,
            turn.message_id,
            grown.content,
            stats,
            grown.retrieval_ms,
            result,
            relayed.repeated,
        )
