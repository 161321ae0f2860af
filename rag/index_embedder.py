"""Which embedder an index on disk was built with, and the refusal to mix two (pure + one read).

Vectors of two embedding models live in different spaces (and often have different widths):
searching one model's vectors with another's query, or adding one model's vectors beside the
other's, returns confident nonsense. So an index records its embedder (``VectorIndex.save``
writes the model name and width into the manifest), and opening it with another embedder is
refused until every chunk is embedded again. An empty index, or none at all, is no conflict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rag.index import MANIFEST_FILE


@dataclass(frozen=True)
class SavedEmbedder:
    """The embedder an index was saved with, and how many vector slots it held."""

    model: str
    dim: int
    count: int


class EmbedderMismatch(ValueError):
    """The index in ``directory`` holds vectors of another embedder than the one configured."""

    def __init__(self, directory: Path, saved: SavedEmbedder, model: str, dim: int) -> None:
        self.directory, self.saved, self.model, self.dim = directory, saved, model, dim
        super().__init__(
            f"the index in {directory} holds {saved.count} vectors of the embedder "
            f"{saved.model!r} (dim {saved.dim}), but the configured embedder is {model!r} "
            f"(dim {dim}); vectors of two embedders cannot be mixed"
        )


def embedder_of(manifest: object) -> SavedEmbedder | None:
    """The embedder a parsed index manifest records (pure); None when it records none."""
    try:
        return SavedEmbedder(
            str(manifest["model"]), int(manifest["dim"]), int(manifest.get("count", 0))
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def saved_embedder(directory: Path) -> SavedEmbedder | None:
    """The embedder recorded in ``directory``'s index manifest; None when there is no readable
    manifest (no index yet, or one so damaged that it is rebuilt from the database anyway)."""
    try:
        manifest = json.loads((directory / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return embedder_of(manifest)


def is_other(saved: SavedEmbedder | None, model: str, dim: int | None) -> bool:
    """``saved`` holds vectors and is not (``model``, ``dim``); ``dim`` None (not known
    without loading the model) compares the name alone."""
    if saved is None or saved.count <= 0:
        return False
    return saved.model != model or (dim is not None and saved.dim != dim)


def check_embedder(directory: Path, model: str, dim: int) -> None:
    """Raise ``EmbedderMismatch`` when ``directory`` holds vectors of another embedder than
    (``model``, ``dim``); return quietly when it holds none, or this embedder's."""
    saved = saved_embedder(directory)
    if saved is not None and is_other(saved, model, dim):
        raise EmbedderMismatch(directory, saved, model, dim)


def other_embedder(directory: Path, model: str, dim: int | None) -> SavedEmbedder | None:
    """The embedder recorded in ``directory`` when its index holds vectors and it is not
    (``model``, ``dim``) (``is_other``). The check of the installer, which does not load the
    model."""
    saved = saved_embedder(directory)
    return saved if is_other(saved, model, dim) else None
