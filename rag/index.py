"""The FAISS vector index: ids are chunk primary keys; persistence is atomic.

``save`` writes to a temporary file in the same directory and renames it over the old one, so
a crash mid-write leaves the previous index intact. The database is the source of truth: when
the saved index disagrees with it (a crash between the two), ``VectorIndex.reconcile`` rebuilds.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import faiss
import numpy as np

INDEX_FILE = "vectors.faiss"
MANIFEST_FILE = "manifest.json"


def _atomic_write(path: Path, write) -> None:  # noqa: ANN001
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class VectorIndex:
    """Exact inner-product search over L2-normalised vectors, keyed by chunk id."""

    def __init__(self, dim: int, model_name: str) -> None:
        self.dim = dim
        self.model_name = model_name
        self._index = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))

    @property
    def size(self) -> int:
        return int(self._index.ntotal)

    def ids(self) -> set[int]:
        return set(faiss.vector_to_array(self._index.id_map).tolist())

    def add(self, ids: Sequence[int], vectors: np.ndarray) -> None:
        if len(ids) != len(vectors):
            raise ValueError("ids and vectors differ in length")
        if len(ids):
            self._index.add_with_ids(vectors, np.asarray(ids, dtype=np.int64))

    def remove(self, ids: Sequence[int]) -> int:
        if not ids:
            return 0
        return int(self._index.remove_ids(np.asarray(ids, dtype=np.int64)))

    def search(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        if self.size == 0:
            return []
        scores, ids = self._index.search(query.reshape(1, -1).astype(np.float32), min(k, self.size))
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i != -1]

    def save(self, directory: Path) -> None:
        _atomic_write(directory / INDEX_FILE, lambda tmp: faiss.write_index(self._index, tmp))
        manifest = {"dim": self.dim, "model": self.model_name, "count": self.size}
        _atomic_write(
            directory / MANIFEST_FILE,
            lambda tmp: Path(tmp).write_text(json.dumps(manifest), encoding="utf-8"),
        )

    @classmethod
    def load(cls, directory: Path, dim: int, model_name: str) -> VectorIndex | None:
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
        index = cls(dim, model_name)
        index._index = loaded
        return index
