"""An index records its embedder; another embedder is refused, an empty index is no conflict."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rag.index import VectorIndex
from rag.index_embedder import EmbedderMismatch, check_embedder, saved_embedder


def _saved(directory: Path, model: str, dim: int, vectors: int) -> None:
    index = VectorIndex(dim, model)
    if vectors:
        rows = np.random.default_rng(0).standard_normal((vectors, dim)).astype(np.float32)
        index.add(list(range(1, vectors + 1)), rows / np.linalg.norm(rows, axis=1, keepdims=True))
    index.save(directory)


def test_the_saved_manifest_names_the_embedder(tmp_path: Path) -> None:
    assert saved_embedder(tmp_path) is None  # no index yet
    _saved(tmp_path, "all-MiniLM-L6-v2", 8, 3)
    saved = saved_embedder(tmp_path)
    assert saved is not None and (saved.model, saved.dim, saved.count) == ("all-MiniLM-L6-v2", 8, 3)


def test_another_embedder_is_refused_and_says_which(tmp_path: Path) -> None:
    _saved(tmp_path, "all-MiniLM-L6-v2", 8, 3)
    check_embedder(tmp_path, "all-MiniLM-L6-v2", 8)  # the same one: fine
    for model, dim in (("bge-m3", 16), ("bge-m3", 8), ("all-MiniLM-L6-v2", 16)):
        with pytest.raises(EmbedderMismatch) as refused:
            check_embedder(tmp_path, model, dim)
        assert "'all-MiniLM-L6-v2' (dim 8)" in str(refused.value)
        assert f"{model!r} (dim {dim})" in str(refused.value) and "3 vectors" in str(refused.value)


def test_an_empty_or_unreadable_index_is_no_conflict(tmp_path: Path) -> None:
    _saved(tmp_path, "all-MiniLM-L6-v2", 8, 0)
    check_embedder(tmp_path, "bge-m3", 16)
    (tmp_path / "manifest.json").write_text("{not json")
    check_embedder(tmp_path, "bge-m3", 16)  # rebuilt from the database anyway


def test_the_checks_that_load_no_model_compare_the_width_when_the_folder_says(
    tmp_path: Path,
) -> None:
    import json
    import shutil

    from rag.embeddings import default_model_dir, embedder_dim
    from rag.index_embedder import other_embedder

    assert embedder_dim() == 384  # the bundled all-MiniLM-L6-v2, read from 1_Pooling
    assert embedder_dim(tmp_path / "missing") is None
    # a same-named folder of another width: read from its configs, no model loaded
    wide = tmp_path / "models" / "all-MiniLM-L6-v2"
    shutil.copytree(default_model_dir(), wide, ignore=shutil.ignore_patterns("*.safetensors"))
    pooling = wide / "1_Pooling" / "config.json"
    pooling.write_text(
        json.dumps({**json.loads(pooling.read_text()), "word_embedding_dimension": 768})
    )
    assert embedder_dim(wide) == 768

    index = tmp_path / "index"
    _saved(index, "all-MiniLM-L6-v2", 384, 2)
    assert other_embedder(index, "all-MiniLM-L6-v2", 384) is None
    assert other_embedder(index, "all-MiniLM-L6-v2", None) is None  # width unknown: the name
    assert other_embedder(index, "all-MiniLM-L6-v2", embedder_dim(wide)).dim == 384
    assert other_embedder(index, "bge-m3", None).model == "all-MiniLM-L6-v2"
    _saved(tmp_path / "empty", "bge-m3", 8, 0)
    assert other_embedder(tmp_path / "empty", "all-MiniLM-L6-v2", 384) is None


def test_a_manifest_is_read_as_data_and_compared_purely() -> None:
    from rag.index_embedder import SavedEmbedder, embedder_of, is_other

    saved = embedder_of({"model": "m", "dim": 384, "count": 3})
    assert saved == SavedEmbedder("m", 384, 3)
    for broken in ([], "m", {"model": "m"}, {"model": "m", "dim": "wide"}, None):
        assert embedder_of(broken) is None, broken
    assert not is_other(saved, "m", 384) and not is_other(saved, "m", None)
    assert is_other(saved, "m", 768) and is_other(saved, "other", None)
    assert not is_other(SavedEmbedder("m", 384, 0), "other", 768)  # no vectors: no conflict
    assert not is_other(None, "other", 768)
