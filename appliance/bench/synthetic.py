"""A deterministic synthetic corpus for the index benchmark: topic texts with matching vectors.

Each document belongs to one of ``topics`` topics. Its text draws words mostly from its topic's
vocabulary (Latin pseudo-words, plus Korean-like Hangul words in a share of the documents),
and its vector is its topic's random unit centroid plus unit noise, normalised, so dense and
lexical retrieval agree roughly as they do on real data. Queries take a few words of one
document and its vector plus noise. The vectors are synthetic: no model embeds these texts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))
# common Hangul syllables, so the Korean-like words look like Korean to the analyser
SYLLABLES = np.array(
    list("가나다라마바사아자차카타파하고노도로모보소오조초서어저처기니디리미비시이지치")
)


@dataclass(frozen=True)
class Corpus:
    """Texts and unit vectors of the documents, and of queries made from some of them."""

    texts: list[str]
    vectors: np.ndarray
    query_texts: list[str]
    query_vectors: np.ndarray
    query_sources: np.ndarray  # the document each query was made from


def _unit(a: np.ndarray) -> np.ndarray:
    return (a / np.linalg.norm(a, axis=-1, keepdims=True)).astype(np.float32)


def _words(rng: np.random.Generator, n: int, alphabet: np.ndarray, lo: int, hi: int) -> list[str]:
    lengths = rng.integers(lo, hi + 1, size=n)
    return ["".join(rng.choice(alphabet, size=length)) for length in lengths]


def make_corpus(
    n_docs: int,
    n_queries: int = 200,
    dim: int = 384,
    topics: int = 500,
    korean_share: float = 0.2,
    seed: int = 0,
) -> Corpus:
    """``n_docs`` documents of 40-80 words and ``n_queries`` queries, all from ``seed``."""
    rng = np.random.default_rng(seed)
    latin = np.array(_words(rng, 20000, LETTERS, 3, 9))
    korean = np.array(_words(rng, 4000, SYLLABLES, 2, 3))
    topic_latin = rng.integers(0, len(latin), size=(topics, 60))
    topic_korean = rng.integers(0, len(korean), size=(topics, 20))
    centroids = _unit(rng.standard_normal((topics, dim)))

    doc_topic = rng.integers(0, topics, size=n_docs)
    texts = []
    for t in doc_topic:
        n = int(rng.integers(40, 81))
        own = latin[topic_latin[t, rng.zipf(1.5, size=n) % 60]]
        words = np.where(rng.random(n) < 0.8, own, latin[rng.integers(0, len(latin), size=n)])
        if rng.random() < korean_share:
            ko = korean[topic_korean[t, rng.integers(0, 20, size=n // 4)]]
            words = np.concatenate([words, ko])
            rng.shuffle(words)
        texts.append(" ".join(words.tolist()))
    noise = _unit(rng.standard_normal((n_docs, dim)))
    vectors = _unit(centroids[doc_topic] + 0.8 * noise)

    sources = rng.integers(0, n_docs, size=n_queries)
    query_texts = []
    for s in sources:
        words = texts[s].split()
        query_texts.append(" ".join(rng.choice(words, size=min(5, len(words)), replace=False)))
    query_vectors = _unit(vectors[sources] + _unit(rng.standard_normal((n_queries, dim))))
    return Corpus(texts, vectors, query_texts, query_vectors, sources)
