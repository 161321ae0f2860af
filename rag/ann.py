"""FAISS building blocks for ``VectorIndex``: exact and HNSW indexes, tombstones, efSearch tuning.

Both kinds are an ``IndexIDMap2`` (position -> chunk id) over a flat vector store, so every
stored vector can be read back without re-embedding. HNSW graphs cannot drop nodes, so a
deleted position is *tombstoned*: its id in the id map is overwritten with ``TOMBSTONE`` (-1)
and searches skip it through an ``IDSelectorRange`` over non-negative ids.
"""

from __future__ import annotations

import faiss
import numpy as np

TOMBSTONE = -1
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80
EF_CANDIDATES = (16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)


def new_flat(dim: int) -> faiss.IndexIDMap2:
    """An empty exact inner-product index keyed by chunk id."""
    return faiss.IndexIDMap2(faiss.IndexFlatIP(dim))


def kind_of(index: faiss.IndexIDMap2) -> str:
    """``"hnsw"`` or ``"flat"``: the kind of the index inside the id map."""
    inner = faiss.downcast_index(index.index)
    return "hnsw" if isinstance(inner, faiss.IndexHNSW) else "flat"


def id_map_view(index: faiss.IndexIDMap2) -> np.ndarray:
    """A writable int64 view of the position -> id map (shares memory with the index)."""
    n = int(index.ntotal)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    return faiss.rev_swig_ptr(index.id_map.data(), n)


def stored_vectors(index: faiss.IndexIDMap2) -> tuple[np.ndarray, np.ndarray]:
    """(ids, vectors) of every live position, copied out of the index's flat storage."""
    ids = id_map_view(index).copy()
    if len(ids) == 0:
        return ids, np.zeros((0, index.d), dtype=np.float32)
    inner = faiss.downcast_index(index.index)
    store = faiss.downcast_index(inner.storage) if isinstance(inner, faiss.IndexHNSW) else inner
    xb = faiss.rev_swig_ptr(store.get_xb(), len(ids) * index.d).reshape(len(ids), index.d)
    alive = ids != TOMBSTONE
    return ids[alive], np.array(xb[alive], dtype=np.float32)


def build_hnsw(dim: int, ids: np.ndarray, vectors: np.ndarray) -> faiss.IndexIDMap2:
    """An HNSW (M=32, efConstruction=80, inner product) index over ``vectors`` keyed by ``ids``."""
    hnsw = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
    index = faiss.IndexIDMap2(hnsw)
    if len(ids):
        index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), ids.astype(np.int64))
    return index


def alive_selector() -> faiss.IDSelector:
    """Selects chunk ids >= 0, i.e. skips tombstoned positions."""
    return faiss.IDSelectorRange(0, np.iinfo(np.int64).max)


def hnsw_params(ef_search: int, selector: faiss.IDSelector) -> faiss.SearchParametersHNSW:
    params = faiss.SearchParametersHNSW()
    params.efSearch = ef_search
    params.sel = selector
    return params


def sample_queries(vectors: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """Queries near stored vectors: a stored vector plus an equal-norm random direction."""
    rng = np.random.default_rng(seed)
    picked = vectors[rng.choice(len(vectors), size=min(n, len(vectors)), replace=False)]
    noise = rng.standard_normal(picked.shape).astype(np.float32)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    q = picked + noise
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def exact_top_k(vectors: np.ndarray, ids: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """The ids of the exact top-k inner products, one row per query (order within a row free)."""
    k = min(k, len(ids))
    scores = queries @ vectors.T
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    return ids[top]


def recall_at_k(found: np.ndarray, truth: np.ndarray) -> float:
    """Mean fraction of each truth row present in the matching found row."""
    hits = [
        len(set(f.tolist()) & set(t.tolist())) / len(t) for f, t in zip(found, truth, strict=True)
    ]
    return float(np.mean(hits)) if hits else 1.0


def tune_ef_search(
    index: faiss.IndexIDMap2,
    ids: np.ndarray,
    vectors: np.ndarray,
    k: int = 10,
    target: float = 0.97,
    n_queries: int = 200,
) -> int:
    """The smallest efSearch whose recall@k against exact search reaches ``target``.

    ``target`` sits a little above the 0.95 promise, since the sample is only an estimate.
    """
    queries = sample_queries(vectors, n_queries)
    truth = exact_top_k(vectors, ids, queries, k)
    selector = alive_selector()
    for ef in EF_CANDIDATES:
        _, found = index.search(queries, min(k, len(ids)), params=hnsw_params(max(ef, k), selector))
        if recall_at_k(found, truth) >= target:
            return ef
    return EF_CANDIDATES[-1]
