"""Laying out one chat turn's prompt: retrieve the top-k (and the cache-rider candidates), lay
the turn out after the stored conversation (``rag.layout``: append to what was sent last time,
or re-lay the documents first; ``adaptive`` sends the one with the fewer tokens the cache shadow
predicts uncached), and fit the whole in the engine's context window (riders go first, then the
oldest turns). The earlier turns that used a chunk the reader may no longer read are left out
(``turn_access``). Reads the index and asks the engine for token counts; stores nothing.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from appliance.core.auth.principal import Principal
from appliance.core.services.knowledge import KnowledgeBase
from appliance.core.services.settings import ChatSettings
from appliance.core.services.turn_access import withheld
from appliance.core.services.turn_history import StoredTurn, sent_pairs
from engine.base import Engine
from rag.bm25_tokenizer import Tokenizer
from rag.followup import retrieval_query
from rag.layout import Conversation, Layout, Order
from rag.layout_choice import lay_out
from rag.ordering import ContextOrdering
from rag.prompt import Citation
from rag.types import RetrievedChunk

Messages = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class PreparedTurn:
    """One turn, laid out: the prompt to send (``prompt``: its messages, the shadow keys the
    ordering observes, what the turn stores of it) and what the service stores and reports."""

    conversation_id: int | None
    prompt: Layout
    citations: list[Citation]
    retrieval_ms: float
    settings: ChatSettings
    page_tokens: int  # the engine's prefix-cache granularity when the turn was laid out
    # every chunk this turn cites (retrieved, then riders): what the evidence card reads
    sources: tuple[RetrievedChunk, ...] = ()
    # the cached tokens the cache shadow predicted for the layout sent, before it was sent
    predicted_cached: int = 0
    # the indexes of the earlier turns left out of the prompt: they used a chunk the reader
    # may no longer read (``turn_access.withheld``)
    withheld: frozenset[int] = frozenset()

    @property
    def messages(self) -> Messages:
        return self.prompt.messages

    @property
    def layout(self) -> str:
        """The layout sent (``rag.layout``: append or relay)."""
        return self.prompt.kind


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
        self.tokenize = Tokenizer().tokenize  # the retriever's lexical terms (rag.followup)

    def prepare(
        self,
        principal: Principal,
        question: str,
        conversation_id: int | None,
        history: Sequence[StoredTurn],
        settings: ChatSettings,
    ) -> PreparedTurn:
        """The turn after ``history`` (the conversation so far), under ``settings``."""
        # the turns that used a chunk the reader may no longer read stay out of the prompt
        left_out = withheld(history, self.knowledge.readable(principal.allowed_collections))
        # a follow-up that leans on the conversation is retrieved with the earlier question's
        # words; one that names its own subject is retrieved alone (rag.followup)
        earlier = [t.question for n, t in enumerate(history) if n not in left_out and t.question]
        query = retrieval_query(question, earlier, self.tokenize)
        retrieved, retrieval_ms = self.knowledge.retrieve(
            query.text, settings.top_k, principal.allowed_collections
        )
        candidates, extra_ms = self._candidates(principal, query.text, settings, retrieved)
        retrieval_ms += extra_ms
        info = self.engine.info()
        limit = info.context_length - settings.max_new_tokens
        counted: dict[Messages, int] = {}

        def count(layout: Layout) -> int:
            if layout.messages not in counted:
                rendered = self.engine.render_chat(layout.messages)
                counted[layout.messages] = self.engine.count_tokens(rendered)
            return counted[layout.messages]

        def predict(layout: Layout) -> int:
            return self.ordering.predicted_cached(layout.keys)

        pairs = sent_pairs(history)
        # keep the last N turns; if the prompt would not fit, drop the cache riders first (they
        # are extras), then the oldest whole turns (their chunks keep their numbers)
        keep = min(self.history_turns, len(pairs))
        max_riders, first = settings.riders, True
        while True:
            conv = Conversation.resume(settings.system_prompt, pairs, keep, left_out)
            # only the first try of a turn counts its chunks as retrieved
            order = _orderer(self.ordering, settings.ordering, max_riders, first)
            chosen, scored = lay_out(
                settings.layout, conv, question, retrieved, order, count, predict, candidates
            )
            first = False
            riders = any(c.rider for c in chosen.citations)
            if not (keep or riders):
                break  # nothing to drop: the engine refuses a prompt that is still too long
            if count(chosen) <= limit:
                break
            if riders:
                max_riders = 0
            else:
                keep -= 1
        ridden = {c.chunk_id for c in chosen.citations if c.rider}
        return PreparedTurn(
            conversation_id,
            chosen,
            list(chosen.citations),
            retrieval_ms,
            settings,
            info.cache_page_tokens,
            (*retrieved, *(c for c in candidates if c.chunk_id in ridden)),
            scored[chosen.kind][1],
            left_out,
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


def _orderer(ordering: ContextOrdering, strategy: str, max_riders: int, counts: bool) -> Order:
    """``strategy`` as ``rag.layout`` orders with it: at most ``max_riders`` riders, and the
    chunks counted as retrieved only where ``counts`` (and the layout says so)."""

    def order(
        chunks: Sequence[RetrievedChunk],
        prefix: Sequence[Hashable],
        offered: Sequence[RetrievedChunk],
        tally: bool,
    ) -> list[RetrievedChunk]:
        return ordering.order(strategy, chunks, prefix, offered, max_riders, tally=tally and counts)

    return order
