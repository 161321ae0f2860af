"""The FAISS vector index: ids are chunk primary keys; exact when small, HNSW when large.

Kinds and the switch:
- ``flat``: ``IndexIDMap2(IndexFlatIP)``, exact search; deletes are real (``remove_ids``).
- ``hnsw``: ``IndexIDMap2(IndexHNSWFlat)`` (M=32, efConstruction=80, inner product). ``add``
  switches once the live count reaches ``ann_threshold``, rebuilding from the stored vectors
  (flat storage keeps every vector reconstructible). efSearch is tuned at each (re)build
  against exact search on a sample, for recall@10 >= 0.95.

Deletes and updates without a full rebuild per change (HNSW cannot drop nodes): a deleted
position is tombstoned (its id becomes -1 in the id map, searches skip it through an id
selector, so results stay exact-k); an update is delete + add, new vectors go straight into
the graph. When tombstones exceed ``compact_ratio`` of the stored positions the graph is
rebuilt from the live vectors (and falls back to flat below half the threshold).

With faiss-gpu and a GPU, flat searches run on a GPU copy made lazily after each change
(faiss has no GPU HNSW; an HNSW index stays on the CPU).

``save`` writes to a temporary file in the same directory and renames it over the old one, so
a crash mid-write leaves the previous index intact. The index file is self-describing (kind,
tombstones); the manifest records dim, model, count and kind. The database is the source of
truth: when the saved index disagrees with it, ``KnowledgeBase.reconcile`` heals it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import faiss
import numpy as np

from rag import ann
from rag.atomic import atomic_write

INDEX_FILE = "vectors.faiss"
MANIFEST_FILE = "manifest.json"
log = logging.getLogger(__name__)


class VectorIndex:
    """Inner-product search over L2-normalised vectors, keyed by chunk id."""

    def __init__(
        self,
        dim: int,
        model_name: str,
        ann_threshold: int = 20000,
        compact_ratio: float = 0.2,
    ) -> None:
        self.dim = dim
        self.model_name = model_name
        self.ann_threshold = ann_threshold
        self.compact_ratio = compact_ratio
        self.ef_search = ann.EF_CANDIDATES[-1]
        self._index = ann.new_flat(dim)
        self._dead = 0
        self._selector = ann.alive_selector()
        self._gpu: faiss.Index | None = None
        self._gpu_res: object | None = None
        self._gpu_failed = False

    @property
    def kind(self) -> str:
        """``"flat"`` (exact) or ``"hnsw"`` (approximate)."""
        return ann.kind_of(self._index)

    @property
    def size(self) -> int:
        return int(self._index.ntotal) - self._dead

    @property
    def tombstones(self) -> int:
        """Deleted positions still in the HNSW graph (always 0 for flat)."""
        return self._dead

    def ids(self) -> set[int]:
        stored = ann.id_map_view(self._index)
        return set(stored[stored != ann.TOMBSTONE].tolist())

    def add(self, ids: Sequence[int], vectors: np.ndarray) -> None:
        """Add vectors; an id already present is replaced (update = remove + add)."""
        if len(ids) != len(vectors):
            raise ValueError("ids and vectors differ in length")
        if not len(ids):
            return
        new_ids = np.asarray(ids, dtype=np.int64)
        vecs = np.ascontiguousarray(vectors, dtype=np.float32)
        if len(np.unique(new_ids)) != len(new_ids):
            raise ValueError("duplicate ids in one add")
        self.remove(new_ids.tolist(), compact=False)
        self._gpu = None
        if self.kind == "flat" and self.size + len(new_ids) >= self.ann_threshold:
            old_ids, old_vecs = ann.stored_vectors(self._index)
            self._rebuild_hnsw(np.concatenate([old_ids, new_ids]), np.vstack([old_vecs, vecs]))
            return
        self._index.add_with_ids(vecs, new_ids)
        if self.kind == "hnsw" and self._dead > self.compact_ratio * self._index.ntotal:
            self.compact()

    def remove(self, ids: Sequence[int], compact: bool = True) -> int:
        """Delete ids; returns how many were present. HNSW may compact afterwards."""
        if not len(ids):
            return 0
        wanted = np.asarray(ids, dtype=np.int64)
        if self.kind == "flat":
            removed = int(self._index.remove_ids(wanted))
            self._gpu = None if removed else self._gpu
            return removed
        stored = ann.id_map_view(self._index)
        hit = np.isin(stored, wanted) & (stored != ann.TOMBSTONE)
        removed = int(hit.sum())
        stored[hit] = ann.TOMBSTONE
        self._dead += removed
        if compact and self._dead > self.compact_ratio * self._index.ntotal:
            self.compact()
        return removed

    def compact(self) -> None:
        """Rebuild from live vectors, dropping tombstones (flat again below threshold / 2)."""
        live_ids, live_vecs = ann.stored_vectors(self._index)
        if len(live_ids) < self.ann_threshold // 2:
            self._index, self._dead = ann.new_flat(self.dim), 0
            if len(live_ids):
                self._index.add_with_ids(live_vecs, live_ids)
        else:
            self._rebuild_hnsw(live_ids, live_vecs)
        self._gpu = None

    def _rebuild_hnsw(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        log.info("building an HNSW index over %d vectors", len(ids))
        self._index = ann.build_hnsw(self.dim, ids, vectors)
        self._dead = 0
        self.ef_search = ann.tune_ef_search(self._index, ids, vectors)
        faiss.downcast_index(self._index.index).hnsw.efSearch = self.ef_search

    def search(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        if self.size == 0 or k <= 0:
            return []
        q = np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32)
        k = min(k, self.size)
        if self.kind == "hnsw":
            params = ann.hnsw_params(max(self.ef_search, k), self._selector)
            scores, ids = self._index.search(q, k, params=params)
        else:
            scores, ids = self._searcher().search(q, k)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]

    def _searcher(self) -> faiss.Index:
        """The flat index, or its GPU copy when faiss-gpu sees a GPU."""
        if self._gpu is not None:
            return self._gpu
        if not self._gpu_failed and getattr(faiss, "get_num_gpus", lambda: 0)() > 0:
            try:
                self._gpu_res = self._gpu_res or faiss.StandardGpuResources()
                self._gpu = faiss.index_cpu_to_gpu(self._gpu_res, 0, self._index)
                return self._gpu
            except (RuntimeError, AttributeError) as exc:  # pragma: no cover - GPU only
                self._gpu_failed = True
                log.warning("GPU search unavailable, staying on the CPU: %s", exc)
        return self._index

    def save(self, directory: Path) -> None:
        atomic_write(directory / INDEX_FILE, lambda tmp: faiss.write_index(self._index, tmp))
        manifest = {
            "dim": self.dim,
            "model": self.model_name,
            "count": self.size,
            "kind": self.kind,
            "ef_search": self.ef_search,
            "tombstones": self._dead,
        }
        atomic_write(
            directory / MANIFEST_FILE,
            lambda tmp: Path(tmp).write_text(json.dumps(manifest), encoding="utf-8"),
        )

    @classmethod
    def load(
        cls, directory: Path, dim: int, model_name: str, ann_threshold: int = 20000
    ) -> VectorIndex | None:
        """The saved index, or None when it is missing or was built by another model."""
        try:
            manifest = json.loads((directory / MANIFEST_FILE).read_text(encoding="utf-8"))
            if manifest.get("dim") != dim or manifest.get("model") != model_name:
                return None
            loaded = faiss.read_index(str(directory / INDEX_FILE))
        except (OSError, ValueError, RuntimeError):
            return None
        if not isinstance(loaded, faiss.IndexIDMap2) or loaded.d != dim:
            return None
        index = cls(dim, model_name, ann_threshold=ann_threshold)
        index._index = loaded
        index._dead = int((ann.id_map_view(loaded) == ann.TOMBSTONE).sum())
        if index.kind == "hnsw":
            index.ef_search = int(faiss.downcast_index(loaded.index).hnsw.efSearch)
        return index
