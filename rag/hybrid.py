"""Hybrid retrieval: dense (FAISS) and lexical (BM25) rankings fused by Reciprocal Rank Fusion.

RRF (Cormack et al., 2009) scores a document ``sum_i w_i / (k + rank_i)`` over the rankings
that contain it (rank from 1). It needs no score calibration between retrievers, which is why
it is the usual way to fuse BM25 with embeddings.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from typing import Any, Protocol

import numpy as np

Allowed = Callable[[int], bool] | Collection[int] | None
# recent query vectors kept: a turn searches twice (top-k, then the cache-rider candidates), and
# one query embedding costs far more than both searches
QUERY_MEMO = 64


class Searcher(Protocol):
    """What ``HybridRetriever`` needs from each side: top-k (id, score), best first."""

    def search(self, query: Any, k: int) -> list[tuple[int, float]]: ...


def rrf(
    rankings: Sequence[Sequence[int]],
    k: int = 60,
    weights: Sequence[float] | None = None,
) -> list[tuple[int, float]]:
    """Fuse ranked id lists; returns (id, score), best first (ties: first seen first)."""
    if weights is not None and len(weights) != len(rankings):
        raise ValueError("one weight per ranking")
    scores: dict[int, float] = {}
    for n, ranking in enumerate(rankings):
        w = 1.0 if weights is None else float(weights[n])
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + w / (k + rank)
    return sorted(scores.items(), key=lambda item: -item[1])


def as_predicate(allowed: Allowed) -> Callable[[int], bool]:
    """A predicate from a set of permitted ids, a predicate, or None (everything allowed)."""
    if allowed is None:
        return lambda _doc: True
    if callable(allowed):
        return allowed
    permitted = allowed if isinstance(allowed, set | frozenset) else set(allowed)
    return permitted.__contains__


class HybridRetriever:
    """Dense + BM25 retrieval with per-caller access filtering, fused by RRF."""

    def __init__(
        self,
        vector_index: Searcher,
        bm25_index: Searcher,
        embed: Callable[[list[str]], np.ndarray],
        overfetch: int = 4,
        rrf_k: int = 60,
        weights: tuple[float, float] = (1.0, 1.0),
    ) -> None:
        self.vector_index = vector_index
        self.bm25_index = bm25_index
        self.embed = embed
        self.overfetch = overfetch
        self.rrf_k = rrf_k
        self.weights = weights
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._memo_lock = threading.Lock()

    def search(self, query: str, k: int, allowed: Allowed = None) -> list[tuple[int, float]]:
        """Top-k (chunk id, RRF score) among the chunks ``allowed`` lets the caller see.

        Each side is asked for ``overfetch * k`` hits, filtered, then fused; a caller allowed
        only a small part of a large index may get fewer than k results.
        """
        if k <= 0:
            return []
        fetch = self.overfetch * k
        vector = self.query_vector(query)
        return self.fuse(
            self.vector_index.search(vector, fetch),
            self.bm25_index.search(query, fetch),
            k,
            allowed,
        )

    def query_vector(self, query: str) -> np.ndarray:
        """The query's embedding; the last ``QUERY_MEMO`` queries' are remembered."""
        with self._memo_lock:
            vector = self._vectors.get(query)
            if vector is not None:
                self._vectors.move_to_end(query)
                return vector
        vector = np.asarray(self.embed([query]))[0]
        with self._memo_lock:
            self._vectors[query] = vector
            while len(self._vectors) > QUERY_MEMO:
                self._vectors.popitem(last=False)
        return vector

    def fuse(
        self,
        dense: Sequence[tuple[int, float]],
        lexical: Sequence[tuple[int, float]],
        k: int,
        allowed: Allowed = None,
    ) -> list[tuple[int, float]]:
        """Filter both hit lists by ``allowed`` and fuse them (pure; ``search`` calls it)."""
        ok = as_predicate(allowed)
        rankings = [[d for d, _ in hits if ok(d)] for hits in (dense, lexical)]
        return rrf(rankings, k=self.rrf_k, weights=self.weights)[:k]
