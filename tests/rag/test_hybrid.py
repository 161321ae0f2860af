"""Reciprocal Rank Fusion and the hybrid retriever's access filter."""

from __future__ import annotations

import numpy as np
import pytest

from rag.hybrid import HybridRetriever, rrf


def test_rrf_scores_by_hand() -> None:
    fused = dict(rrf([[1, 2, 3], [3, 1]], k=60))
    assert fused[1] == pytest.approx(1 / 61 + 1 / 62)
    assert fused[2] == pytest.approx(1 / 62)
    assert fused[3] == pytest.approx(1 / 63 + 1 / 61)
    assert [d for d, _ in rrf([[1, 2, 3], [3, 1]], k=60)] == [1, 3, 2]


def test_rrf_weights_and_edge_cases() -> None:
    fused = rrf([[1, 2], [2, 1]], k=1, weights=[2.0, 1.0])
    assert fused[0] == (1, pytest.approx(2 / 2 + 1 / 3))
    assert rrf([]) == [] and rrf([[], []]) == []
    with pytest.raises(ValueError):
        rrf([[1]], weights=[1.0, 2.0])


class Fixed:
    """A searcher returning a fixed ranking, recording what it was asked."""

    def __init__(self, ids: list[int]) -> None:
        self.ids = ids
        self.asked: list[int] = []

    def search(self, _query: object, k: int) -> list[tuple[int, float]]:
        self.asked.append(k)
        return [(i, 1.0 / (n + 1)) for n, i in enumerate(self.ids[:k])]


def retriever(dense: list[int], lexical: list[int]) -> HybridRetriever:
    return HybridRetriever(Fixed(dense), Fixed(lexical), embed=lambda t: np.zeros((len(t), 4)))


def test_allowed_excludes_forbidden_ids_even_when_first() -> None:
    r = retriever([7, 1, 2], [7, 3, 1])
    assert 7 not in {i for i, _ in r.search("q", 3, allowed={1, 2, 3})}
    assert 7 not in {i for i, _ in r.search("q", 3, allowed=lambda i: i != 7)}
    assert r.search("q", 1)[0][0] == 7  # no filter: 7 wins on both sides
    assert r.search("q", 3, allowed=set()) == []


def test_fused_result_keeps_one_sided_hits_and_overfetches() -> None:
    r = retriever([1, 2], [3, 4])
    got = [i for i, _ in r.search("q", 4)]
    assert set(got) == {1, 2, 3, 4} and set(got[:2]) == {1, 3}
    assert r.vector_index.asked == [16] and r.bm25_index.asked == [16]


def test_a_repeated_query_is_embedded_once() -> None:
    embedded: list[str] = []

    def embed(texts: list[str]) -> np.ndarray:
        embedded.extend(texts)
        return np.ones((len(texts), 4))

    r = HybridRetriever(Fixed([1, 2]), Fixed([2, 3]), embed=embed)
    first = r.search("how do I reset my password?", 2)
    deeper = r.search("how do I reset my password?", 6)  # the cache-rider candidates' search
    assert embedded == ["how do I reset my password?"]
    assert [i for i, _ in deeper][:2] == [i for i, _ in first]
    for n in range(70):  # the memo is bounded: old queries are forgotten
        r.search(f"question {n}", 1)
    r.search("how do I reset my password?", 2)
    assert embedded.count("how do I reset my password?") == 2
