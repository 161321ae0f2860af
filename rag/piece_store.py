"""The evidence pieces of each chunk, kept next to the FAISS and BM25 indexes.

Per chunk id: each piece's character offsets into the chunk's text and its kind (sentence,
list item, table row), its L2-normalised vector (float16: half the memory, and a cosine error
below 1e-3, far under the gaps the ranker decides on) and its BM25 tokens (computed at ingest:
Kiwi costs about 0.4 ms per Korean sentence, too slow for the query path).

Persistence is one ``.npz`` file written atomically (``rag.atomic``), with the embedding model
name and dimension: a store built by another model does not load, so ``reconcile`` rebuilds it.
The database is the source of truth; the knowledge base keeps this store in step with it.
"""

from __future__ import annotations

import json
import threading
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rag.atomic import atomic_write

PIECES_FILE = "pieces.npz"
FORMAT = 1
KINDS = ("sentence", "item", "row")
_TERM_SEP, _PIECE_SEP, _CHUNK_SEP = " ", "\n", "\x1e"


@dataclass(frozen=True, eq=False)
class ChunkPieces:
    """One chunk's pieces: ``starts``/``ends`` (int32) are offsets into the chunk's text,
    ``kinds`` (uint8) index ``KINDS``, ``vectors`` is float16 ``[n, dim]``, ``terms`` holds
    each piece's BM25 tokens (``piece_terms`` decodes them)."""

    starts: np.ndarray
    ends: np.ndarray
    kinds: np.ndarray
    vectors: np.ndarray
    terms: str

    def __len__(self) -> int:
        return len(self.starts)

    def piece_terms(self) -> list[list[str]]:
        """The BM25 tokens of each piece, in piece order."""
        if not len(self):
            return []
        return [p.split(_TERM_SEP) if p else [] for p in self.terms.split(_PIECE_SEP)]

    def kind(self, j: int) -> str:
        return KINDS[int(self.kinds[j])]


def clean_terms(terms: Iterable[str]) -> list[str]:
    """Terms as stored: split on whitespace (a stored term never holds a separator)."""
    return [part for t in terms for part in t.replace(_CHUNK_SEP, " ").split()]


def make_pieces(
    spans: Sequence[tuple[int, int, str]], vectors: np.ndarray, terms: Sequence[Sequence[str]]
) -> ChunkPieces:
    """A ``ChunkPieces`` from ``(start, end, kind)`` spans, their vectors and their tokens."""
    if not (len(spans) == len(vectors) == len(terms)):
        raise ValueError("spans, vectors and terms differ in length")
    codes = [KINDS.index(kind) for _, _, kind in spans]  # ValueError on an unknown kind
    vecs = np.asarray(vectors, dtype=np.float16)
    if vecs.ndim != 2:
        raise ValueError("piece vectors must be a matrix, one row per piece")
    return ChunkPieces(
        starts=np.asarray([s for s, _, _ in spans], dtype=np.int32),
        ends=np.asarray([e for _, e, _ in spans], dtype=np.int32),
        kinds=np.asarray(codes, dtype=np.uint8),
        vectors=np.ascontiguousarray(vecs),
        terms=_PIECE_SEP.join(_TERM_SEP.join(clean_terms(t)) for t in terms),
    )


class PieceStore:
    """Chunk id -> ``ChunkPieces``, for one embedding model (name and dimension)."""

    def __init__(self, dim: int, model_name: str) -> None:
        self.dim = dim
        self.model_name = model_name
        self._chunks: dict[int, ChunkPieces] = {}
        self._lock = threading.RLock()

    @property
    def size(self) -> int:
        return len(self._chunks)

    def ids(self) -> set[int]:
        with self._lock:
            return set(self._chunks)

    def get(self, chunk_id: int) -> ChunkPieces | None:
        return self._chunks.get(int(chunk_id))

    def add(self, ids: Sequence[int], pieces: Sequence[ChunkPieces]) -> None:
        """Add or replace the pieces of each chunk."""
        if len(ids) != len(pieces):
            raise ValueError("ids and pieces differ in length")
        for p in pieces:
            if len(p) and p.vectors.shape[1] != self.dim:
                raise ValueError(f"piece vectors have dim {p.vectors.shape[1]}, not {self.dim}")
        with self._lock:
            for cid, p in zip(ids, pieces, strict=True):
                self._chunks[int(cid)] = p

    def remove(self, ids: Sequence[int]) -> int:
        """Drop chunks; returns how many were present."""
        with self._lock:
            return sum(self._chunks.pop(int(i), None) is not None for i in ids)

    def save(self, directory: Path) -> None:
        """Write every chunk's pieces to ``directory/pieces.npz`` atomically."""
        with self._lock:
            items = list(self._chunks.items())
        arrays = _flatten(items, self.dim)
        meta = json.dumps({"format": FORMAT, "dim": self.dim, "model": self.model_name})
        arrays["meta"] = np.frombuffer(meta.encode("utf-8"), dtype=np.uint8)

        def write(tmp: str) -> None:
            with open(tmp, "wb") as fh:
                np.savez(fh, **arrays)

        atomic_write(directory / PIECES_FILE, write)

    @classmethod
    def load(cls, directory: Path, dim: int, model_name: str) -> PieceStore | None:
        """The saved store, or None when it is missing, unreadable or from another model."""
        try:
            with np.load(directory / PIECES_FILE) as data:
                meta = json.loads(data["meta"].tobytes().decode("utf-8"))
                if (meta.get("format"), meta.get("dim"), meta.get("model")) != (
                    FORMAT,
                    dim,
                    model_name,
                ):
                    return None
                chunks = _unflatten({key: data[key] for key in data.files}, dim)
        except (OSError, ValueError, KeyError, UnicodeDecodeError, zipfile.BadZipFile):
            return None
        store = cls(dim, model_name)
        store._chunks = chunks
        return store


def _flatten(items: list[tuple[int, ChunkPieces]], dim: int) -> dict[str, np.ndarray]:
    """The store as a few flat arrays (one row per chunk or per piece)."""
    pieces = [p for _, p in items]
    vectors = [p.vectors for p in pieces if len(p)]
    terms = _CHUNK_SEP.join(p.terms for p in pieces).encode("utf-8")

    def cat(name: str, dtype: type) -> np.ndarray:
        parts = [getattr(p, name) for p in pieces]
        return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)

    return {
        "ids": np.asarray([cid for cid, _ in items], dtype=np.int64),
        "counts": np.asarray([len(p) for p in pieces], dtype=np.int32),
        "starts": cat("starts", np.int32),
        "ends": cat("ends", np.int32),
        "kinds": cat("kinds", np.uint8),
        "vectors": np.vstack(vectors) if vectors else np.zeros((0, dim), dtype=np.float16),
        "terms": np.frombuffer(terms, dtype=np.uint8),
    }


def _unflatten(arrays: dict[str, np.ndarray], dim: int) -> dict[int, ChunkPieces]:
    """The inverse of ``_flatten``; ValueError when the arrays do not fit together."""
    ids, counts = arrays["ids"], arrays["counts"]
    total = int(counts.sum())
    blob = arrays["terms"].tobytes().decode("utf-8")
    chunk_terms = blob.split(_CHUNK_SEP) if len(ids) else []
    sizes = {len(arrays[k]) for k in ("starts", "ends", "kinds", "vectors")}
    vectors = arrays["vectors"].reshape(-1, dim)  # ValueError on another dimension
    if len(counts) != len(ids) or len(chunk_terms) != len(ids) or sizes != {total}:
        raise ValueError("the piece store's arrays do not fit together")
    bounds = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    out = {}
    for n, cid in enumerate(ids.tolist()):
        a, b = bounds[n], bounds[n + 1]
        out[int(cid)] = ChunkPieces(
            starts=arrays["starts"][a:b].copy(),
            ends=arrays["ends"][a:b].copy(),
            kinds=arrays["kinds"][a:b].copy(),
            vectors=vectors[a:b].copy(),
            terms=chunk_terms[n],
        )
    return out
