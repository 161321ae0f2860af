"""Our strategy, ``prefix``: order a request's chunks so the engine's prefix cache covers most.

For each request (``prefix`` = the keys of everything before this turn's documents):
1. follow the longest token-weighted path of the shadow below ``prefix`` through the retrieved
   chunks: those tokens are (as far as the shadow knows) already in the engine's cache;
2. then the remaining chunks, most popular first (ties: document then chunk id, an order that
   does not depend on the query), so that later requests on the same topic share them;
3. except the most relevant chunk not on the cached path, which goes last, right before the
   relevance hint and the question (lost-in-the-middle: the end is a strong position).
The relevance hint itself is rendered by ``rag.prompt.render_user_turn``.

Cache riders: a request may also offer ``candidates`` (lower-ranked retrieval results, e.g.
ranks k+1..2k). Those lying on the cached path are taken along (at most ``max_riders``): the
engine holds their KV already, so they cost no prefill now, and once in the conversation a
later turn that retrieves them renders nothing new. Candidates off the cached path are never
taken; every required chunk is always placed, exactly as without candidates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rag.ordering.shadow import ShadowTrie
from rag.types import RetrievedChunk

# tokens of a request after its documents (relevance hint, question, chat-template markers);
# used only to estimate the weight of new conversation segments from a reported prompt size
TAIL_TOKENS_ESTIMATE = 48


def chunk_weight(chunk: RetrievedChunk) -> int:
    """Tokens a chunk takes in the prompt: its text plus its rendered header."""
    text = chunk.token_count or max(1, len(chunk.text) // 4)
    return text + (len(chunk.title) + len(chunk.section)) // 4 + 6


class PrefixOrdering:
    """The ``prefix`` strategy and the engine-cache shadow it reads (one per engine/gateway)."""

    takes_riders = True  # the facade offers it candidates (see ``RiderStrategy``)

    def __init__(self, capacity_tokens: int) -> None:
        self.shadow = ShadowTrie(capacity_tokens)
        self.popularity: Counter[int] = Counter()
        self._requests = 0
        self._tails = 0

    def __call__(
        self,
        chunks: Sequence[RetrievedChunk],
        prefix: Sequence[str],
        candidates: Sequence[RetrievedChunk] = (),
        max_riders: int = 0,
    ) -> list[RetrievedChunk]:
        by_id = {c.chunk_id: c for c in chunks}
        self._count(by_id)
        optional = {c.chunk_id: c for c in candidates if c.chunk_id not in by_id}
        if max_riders <= 0:
            optional = {}
        if len(chunks) <= 1 and not optional:
            return list(chunks)
        start = self.shadow.find(tuple(prefix))
        cached = (
            self.shadow.longest_path(start, set(by_id), set(optional), max_riders)
            if start is not None
            else []
        )
        taken = set(cached)
        rest = [c for c in chunks if c.chunk_id not in taken]  # relevance order
        head = [by_id[i] if i in by_id else optional[i] for i in cached]
        if not rest:
            return head
        last, middle = rest[0], rest[1:]
        middle.sort(key=lambda c: (-self.popularity[c.chunk_id], c.document_id, c.chunk_id))
        return head + middle + [last]

    def observe(
        self,
        prefix: Sequence[str],
        chunk_ids: Sequence[int],
        chunk_tokens: Sequence[int],
        prompt_tokens: int,
        cached_tokens: int,
        page_tokens: int = 1,
    ) -> None:
        """Follow what was sent and what the engine reported as cached (in whole pages of
        ``page_tokens``)."""
        path = (*prefix, *chunk_ids)
        self.shadow.sync(path, cached_tokens, page_tokens=page_tokens)
        # weights: held nodes keep theirs; new prefix segments share what the report leaves
        held = self.shadow.walk(prefix)
        known = sum(n.tokens for n in held) + sum(chunk_tokens)
        missing = len(prefix) - len(held)
        share = max(1, (prompt_tokens - known - TAIL_TOKENS_ESTIMATE) // missing) if missing else 0
        weights = [n.tokens for n in held] + [share] * missing + list(chunk_tokens)
        # the request's own tail (hint, question) is cached too, on a leaf of its own
        tail = max(0, prompt_tokens - sum(weights))
        self._tails += 1
        self.shadow.record((*path, ("tail", self._tails)), [*weights, tail])

    def _count(self, by_id: dict[int, RetrievedChunk]) -> None:
        # popularity of retrieved chunks, halved now and then so that it follows the traffic
        self._requests += 1
        if self._requests % 4096 == 0:
            for key in list(self.popularity):
                self.popularity[key] //= 2
                if not self.popularity[key]:
                    del self.popularity[key]
        self.popularity.update(by_id.keys())
