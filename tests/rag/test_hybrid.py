"""Reciprocal Rank Fusion, its language-aware dense weight and the retriever's access filter."""

from __future__ import annotations

import numpy as np
import pytest

from rag.hybrid import HybridRetriever, dense_weight, hangul_share, rrf


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


def test_hangul_share_counts_words() -> None:
    assert hangul_share("How do I reset my VPN password?") == 0.0
    assert hangul_share("연차 휴가는 최대 며칠까지 받을 수 있나요?") == 1.0
    assert hangul_share("VPN 비밀번호는 어떻게 재설정하나요?") == pytest.approx(0.75)
    assert hangul_share("해외 A등급 도시") == 1.0  # a word with Hangul in it is a Hangul word
    assert hangul_share("") == 0.0 and hangul_share("2024 - 10,000") == 0.0


def test_dense_weight_falls_with_the_hangul_share() -> None:
    assert dense_weight("How do I reset my VPN password?") == 1.0
    assert dense_weight("피싱 메일은 어디로 신고하나요?") == 0.0
    assert dense_weight("피싱 메일은 어디로 신고하나요?", hangul_weight=0.3) == pytest.approx(0.3)
    assert dense_weight("VPN 비밀번호는 어떻게 재설정하나요?") == pytest.approx(0.25)
    assert dense_weight("How do I reset my VPN 비밀번호?") == pytest.approx(6 / 7)


# the dense side puts 1 and 2 first; BM25 puts 5 and 6 first and has 1 and 2 lower down
DENSE = [1, 2, 3, 4]
LEXICAL = [5, 6, 1, 2]


def test_a_hangul_query_is_ranked_by_the_lexical_list() -> None:
    got = [i for i, _ in retriever(DENSE, LEXICAL).search("비밀번호 재설정 방법", 6)]
    assert got == [5, 6, 1, 2, 3, 4]  # BM25's order, then dense-only hits in dense order


def test_an_english_query_is_fused_with_equal_weights() -> None:
    got = retriever(DENSE, LEXICAL).search("reset my password", 6)
    assert got == rrf([DENSE, LEXICAL], k=60)[:6]
    assert [i for i, _ in got][:2] == [1, 2]  # both sides have them: they beat BM25's firsts


def test_a_mixed_query_keeps_some_dense_weight() -> None:
    got = dict(retriever(DENSE, LEXICAL).search("VPN 비밀번호는 어떻게 재설정하나요?", 6))
    assert got[3] == pytest.approx(0.25 / 63)  # dense-only: a quarter of its English score
    assert got[1] == pytest.approx(0.25 / 61 + 1 / 63)
    assert got[1] > got[5] > got[3]  # agreement wins, then BM25's first, then dense-only


def test_a_multilingual_embedder_keeps_equal_weights_for_korean() -> None:
    r = HybridRetriever(
        Fixed(DENSE), Fixed(LEXICAL), embed=lambda t: np.zeros((len(t), 4)), hangul_dense_weight=1
    )
    assert r.search("비밀번호 재설정 방법", 6) == rrf([DENSE, LEXICAL], k=60)[:6]


def test_bad_weights_are_refused() -> None:
    embed = lambda t: np.zeros((len(t), 4))  # noqa: E731
    with pytest.raises(ValueError, match="hangul_dense_weight"):
        HybridRetriever(Fixed([]), Fixed([]), embed=embed, hangul_dense_weight=1.5)
    with pytest.raises(ValueError, match="negative"):
        HybridRetriever(Fixed([]), Fixed([]), embed=embed, weights=(-1.0, 1.0))
