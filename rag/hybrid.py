"""Hybrid retrieval: dense (FAISS) and lexical (BM25) rankings fused by Reciprocal Rank Fusion.

RRF (Cormack et al., 2009) scores a document ``sum_i w_i / (k + rank_i)`` over the rankings
that contain it (rank from 1). It needs no score calibration between retrievers, which is why
it is the usual way to fuse BM25 with embeddings.

The fusion is language-aware: the default embedder (all-MiniLM-L6-v2) is English-only, so its
ranking of a Korean query is noise (on the sample corpus it put the gold chunk of Korean
questions 8th to 80th, where BM25 on Kiwi morphemes put it first for 17 of 21). The dense
ranking's weight therefore falls with the share of the query's words that are Hangul
(``dense_weight``): 1 for a query without Hangul (English is fused exactly as before),
``hangul_dense_weight`` for an all-Hangul query, linear between, so "VPN 비밀번호는 어떻게
재설정하나요?" (3 of 4 words Hangul) still gives the dense side 0.25. With the default of 0
an all-Hangul query is ranked by BM25, and dense-only hits follow in dense order (they fill
the list when BM25 finds fewer than k). A multilingual embedder should pass 1.0.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from typing import Any, Protocol

import numpy as np

from rag.bm25_tokenizer import HANGUL

Allowed = Callable[[int], bool] | Collection[int] | None
# recent query vectors kept: a turn searches twice (top-k, then the cache-rider candidates), and
# one query embedding costs far more than both searches
QUERY_MEMO = 64
# the dense ranking's weight for an all-Hangul query with the default, English-only embedder;
# measured on qa.json (21 Korean questions, top 4): gold phrase 14 -> 19, first citation the
# gold file 15 -> 21, English unchanged (26/27, 26/27); 0.1 gave 19 and 18, 0.5 gave 15 and 16
HANGUL_DENSE_WEIGHT = 0.0
LETTER_RUN = re.compile(r"[^\W\d_]+")  # a word: a run of letters (Hangul syllables included)


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


def hangul_share(query: str) -> float:
    """The share of the query's words (letter runs) that contain Hangul; 0.0 if it has none."""
    words = LETTER_RUN.findall(query)
    if not words:
        return 0.0
    return sum(1 for w in words if HANGUL.search(w)) / len(words)


def dense_weight(query: str, hangul_weight: float = HANGUL_DENSE_WEIGHT) -> float:
    """The dense ranking's RRF weight factor for ``query``: 1.0 without Hangul,
    ``hangul_weight`` when every word is Hangul, linear in ``hangul_share`` between."""
    share = hangul_share(query)
    return (1.0 - share) + share * hangul_weight


def as_predicate(allowed: Allowed) -> Callable[[int], bool]:
    """A predicate from a set of permitted ids, a predicate, or None (everything allowed)."""
    if allowed is None:
        return lambda _doc: True
    if callable(allowed):
        return allowed
    permitted = allowed if isinstance(allowed, set | frozenset) else set(allowed)
    return permitted.__contains__


class HybridRetriever:
    """Dense + BM25 retrieval with per-caller access filtering, fused by RRF.

    ``weights`` are the (dense, lexical) RRF weights; the dense one is scaled per query by
    ``dense_weight(query, hangul_dense_weight)`` (see the module docstring).
    """

    def __init__(
        self,
        vector_index: Searcher,
        bm25_index: Searcher,
        embed: Callable[[list[str]], np.ndarray],
        overfetch: int = 4,
        rrf_k: int = 60,
        weights: tuple[float, float] = (1.0, 1.0),
        hangul_dense_weight: float = HANGUL_DENSE_WEIGHT,
    ) -> None:
        if not 0.0 <= hangul_dense_weight <= 1.0:
            raise ValueError(f"hangul_dense_weight must be in [0, 1], got {hangul_dense_weight}")
        if min(weights) < 0:
            raise ValueError(f"RRF weights must not be negative, got {weights}")
        self.vector_index = vector_index
        self.bm25_index = bm25_index
        self.embed = embed
        self.overfetch = overfetch
        self.rrf_k = rrf_k
        self.weights = weights
        self.hangul_dense_weight = hangul_dense_weight
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._memo_lock = threading.Lock()

    def search(self, query: str, k: int, allowed: Allowed = None) -> list[tuple[int, float]]:
        """Top-k (chunk id, RRF score) among the chunks ``allowed`` lets the caller see.

        Each side is asked for ``overfetch * k`` hits, filtered, then fused, the dense side
        weighted by how little of the query is Hangul; a caller allowed only a small part of a
        large index may get fewer than k results.
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
            dense_scale=dense_weight(query, self.hangul_dense_weight),
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
        dense_scale: float = 1.0,
    ) -> list[tuple[int, float]]:
        """Filter both hit lists by ``allowed`` and fuse them, the dense weight multiplied by
        ``dense_scale`` (pure; ``search`` calls it with the query's ``dense_weight``)."""
        ok = as_predicate(allowed)
        rankings = [[d for d, _ in hits if ok(d)] for hits in (dense, lexical)]
        weights = (self.weights[0] * dense_scale, self.weights[1])
        return rrf(rankings, k=self.rrf_k, weights=weights)[:k]
