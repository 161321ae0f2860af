"""Laying out one chat turn's prompt: retrieve the top-k (and the cache-rider candidates), order
the chunks new to the conversation for prefix reuse, number and render them after the stored
history, and fit the whole in the engine's context window (riders go first, then the oldest
turns). Reads the index and asks the engine for token counts; stores nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.core.auth.principal import Principal
from appliance.core.services.knowledge import KnowledgeBase
from appliance.core.services.settings import ChatSettings
from engine.base import Engine
from rag.layout import APPEND
from rag.ordering import ContextOrdering, riders_in
from rag.prompt import Citation, build_messages, number_chunks, render_user_turn
from rag.prompt_keys import RenderedTurn, rendered_numbers, shadow_prefix, tail_key
from rag.types import RetrievedChunk

# one stored message: role, its text as it was in the prompt, and (answers) its citations
StoredMessage = tuple[str, str, list[dict]]


@dataclass(frozen=True)
class PreparedTurn:
    """One turn, laid out: the messages to send and what the service stores and reports."""

    conversation_id: int | None
    messages: tuple[tuple[str, str], ...]
    user_turn: str
    citations: list[Citation]
    retrieval_ms: float
    settings: ChatSettings
    # for the ordering's cache shadow: what precedes this turn's documents, and the chunk ids
    # rendered in this turn, in prompt order
    prefix: tuple[str, ...]
    sent_chunk_ids: tuple[int, ...]
    page_tokens: int  # the engine's prefix-cache granularity when the turn was laid out
    # every chunk this turn cites (retrieved, then riders): what the evidence card reads
    sources: tuple[RetrievedChunk, ...] = ()
    # the prompt layout sent (``rag.layout``: the chat service appends), and the cached
    # tokens the cache shadow predicted for it before it was sent
    layout: str = APPEND
    predicted_cached: int = 0


class TurnPrompts:
    def __init__(
        self,
        knowledge: KnowledgeBase,
        engine: Engine,
        ordering: ContextOrdering,
        history_turns: int,
    ) -> None:
        self.knowledge = knowledge
        self.engine = engine
        self.ordering = ordering
        self.history_turns = history_turns  # earlier turns kept in the prompt (0: none)

    def prepare(
        self,
        principal: Principal,
        question: str,
        conversation_id: int | None,
        stored: list[StoredMessage],
        settings: ChatSettings,
    ) -> PreparedTurn:
        """The turn after ``stored`` (the conversation so far), under ``settings``."""
        retrieved, retrieval_ms = self.knowledge.retrieve(
            question, settings.top_k, principal.allowed_collections
        )
        candidates, extra_ms = self._candidates(principal, question, settings, retrieved)
        retrieval_ms += extra_ms
        # the turns so far as they sit in the prompt: each user message renders the chunks it
        # numbered first; numbers are never reused, even for turns dropped below
        turns = _turns(stored)
        next_number = 1 + max((n for _t, numbers in turns for n in numbers.values()), default=0)
        # keep the last N turns; if the prompt would not fit, drop the cache riders first (they
        # are extras), then the oldest whole turns
        turns = turns[-self.history_turns :] if self.history_turns else []
        info = self.engine.info()
        limit = info.context_length - settings.max_new_tokens
        max_riders = settings.riders
        while True:
            history = [
                m for t, _n in turns for m in (("user", t.user_turn), ("assistant", t.answer))
            ]
            # chunks rendered in the kept turns keep their numbers and are not repeated (a chunk
            # shown only in a dropped turn is no longer in the prompt: it is rendered again)
            known = {cid: n for _t, numbers in turns for cid, n in numbers.items()}
            prefix = shadow_prefix(settings.system_prompt, [t for t, _n in turns])
            # only chunks new to the conversation are rendered (append-only history); order
            # them for prefix reuse (candidates may ride along where the engine has them
            # cached), then number them in prompt order
            fresh = [c for c in retrieved if c.chunk_id not in known]
            offered = [c for c in candidates if c.chunk_id not in known]
            ordered = self.ordering.order(
                settings.ordering, fresh, prefix, offered, max_riders=max_riders
            )
            riders = riders_in(ordered, offered)
            new_chunks, citations = number_chunks(
                ordered, known, relevance=retrieved, riders=riders, first_number=next_number
            )
            user_turn = render_user_turn(question, new_chunks, citations)
            messages = build_messages(settings.system_prompt, history, user_turn)
            if not (turns or riders):
                break  # nothing to drop: the engine refuses a prompt that is still too long
            if self.engine.count_tokens(self.engine.render_chat(messages)) <= limit:
                break
            if riders:
                max_riders = 0
            else:
                turns = turns[1:]
        sent = tuple(c.chunk_id for _n, c in new_chunks)
        return PreparedTurn(
            conversation_id,
            messages,
            user_turn,
            citations,
            retrieval_ms,
            settings,
            prefix,
            sent,
            info.cache_page_tokens,
            (*retrieved, *riders),
            APPEND,
            self.ordering.predicted_cached((*prefix, *sent, tail_key(user_turn))),
        )

    def _candidates(
        self,
        principal: Principal,
        question: str,
        settings: ChatSettings,
        retrieved: list[RetrievedChunk],
    ) -> tuple[list[RetrievedChunk], float]:
        """Cache-rider candidates: the next ``riders`` chunks after the top-k, under the same
        access control, and the milliseconds it took; none when riders are off or the strategy
        does not take them. A second search, so that the top-k stays exactly what a top-k search
        returns (fusing a deeper pool can reorder it); the retriever remembers the query's
        embedding, so it costs only the index lookups."""
        if not settings.riders or not self.ordering.takes_riders(settings.ordering):
            return [], 0.0
        deeper, ms = self.knowledge.retrieve(
            question, settings.top_k + settings.riders, principal.allowed_collections
        )
        required = {c.chunk_id for c in retrieved}
        return [c for c in deeper if c.chunk_id not in required][: settings.riders], ms


def _turns(stored: list[StoredMessage]) -> list[tuple[RenderedTurn, dict[int, int]]]:
    """The stored conversation as turns (user message, answer), each with the chunks its user
    message rendered (chunk id -> number, in prompt order)."""
    pairs = [
        (user, answer)
        for user, answer in zip(stored[::2], stored[1::2], strict=False)
        if user[0] == "user" and answer[0] == "assistant"
    ]
    numbers = rendered_numbers([answer[2] for _user, answer in pairs])
    return [
        (RenderedTurn(tuple(rendered), user[1], answer[1]), rendered)
        for (user, answer), rendered in zip(pairs, numbers, strict=True)
    ]
