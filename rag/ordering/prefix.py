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
from collections.abc import Hashable, Sequence

from rag.ordering.sent import Sent
from rag.ordering.shadow import ShadowTrie
from rag.prompt_keys import is_answer_key
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
        self.page_tokens = 1  # the engine's cache granularity, from its reports

    def __call__(
        self,
        chunks: Sequence[RetrievedChunk],
        prefix: Sequence[Hashable],
        candidates: Sequence[RetrievedChunk] = (),
        max_riders: int = 0,
        tally: bool = True,
    ) -> list[RetrievedChunk]:
        """``chunks`` in prompt order (see the module docstring); ``tally``: count them as
        retrieved (False for a second layout of the same turn, so no turn counts twice)."""
        by_id = {c.chunk_id: c for c in chunks}
        if tally:
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

    def predicted_cached(self, path: Sequence[Hashable]) -> int:
        """Tokens of ``path`` the engine should find cached: what the shadow holds, in whole
        pages of the engine's cache (as last reported)."""
        held = self.shadow.predicted_cached(path)
        return held - held % self.page_tokens

    def observe(self, sent: Sent) -> None:
        """Follow what was sent and what the engine reported as cached (in whole pages of
        ``sent.page_tokens``); then record the request, its tail and its answer, as the engine
        caches them, under the keys the conversation's next turn will walk."""
        self.page_tokens = max(1, sent.page_tokens)
        tail = sent.tail
        if tail is None:
            self._tails += 1
            tail = ("tail", self._tails)  # unknown: a leaf of its own
        path = (*sent.path[:-1], tail)
        self.shadow.sync(
            path, sent.cached_tokens, page_tokens=sent.page_tokens, local=is_answer_key
        )
        # weights: held nodes keep theirs, then what the facade knows (chunks); prefix segments
        # not held and unknown (messages) share what the report leaves
        held = self.shadow.walk(path)
        missing = path[len(held) : -1]
        known = sum(n.tokens for n in held) + sum(sent.weights.get(k, 0) for k in missing)
        unknown = [k for k in missing if k not in sent.weights]
        share = (
            max(1, (sent.prompt_tokens - known - TAIL_TOKENS_ESTIMATE) // len(unknown))
            if unknown
            else 0
        )
        weights = [n.tokens for n in held] + [sent.weights.get(k, share) for k in missing]
        if len(held) < len(path):  # the tail: whatever of the prompt the rest does not explain
            weights.append(max(0, sent.prompt_tokens - sum(weights)))
        keys = list(path)
        if sent.answer is not None:  # the engine caches the generated tokens after the prompt
            keys.append(sent.answer)
            weights.append(max(0, sent.completion_tokens - 1))
        self.shadow.record(keys, weights)

    def _count(self, by_id: dict[int, RetrievedChunk]) -> None:
        # popularity of retrieved chunks, halved now and then so that it follows the traffic
        self._requests += 1
        if self._requests % 4096 == 0:
            for key in list(self.popularity):
                self.popularity[key] //= 2
                if not self.popularity[key]:
                    del self.popularity[key]
        self.popularity.update(by_id.keys())
