"""The worker of ``appliance bench embedders``: one model embeds one corpus's texts in a
process of its own (its own threads, its own memory peak), timed per wall and CPU second."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from appliance.bench.embedder_corpus import REPO


def _rss_mb() -> tuple[float, float]:
    """(now, peak) resident set of this process in MB (``VmRSS``, ``VmHWM``: reset at exec,
    unlike ``ru_maxrss``)."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return tuple(int(fields[f].split()[0]) / 1024 for f in ("VmRSS", "VmHWM"))  # type: ignore[return-value]


def _timed(fn: Callable[[], object]) -> tuple[object, float, float]:
    """``fn()``, its wall seconds and its CPU seconds (every thread of the process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def _load(key: str, threads: int):  # noqa: ANN202 - an adapter of either kind
    if key == "minilm":
        import torch

        from rag.embeddings import Embedder

        torch.set_num_threads(threads)
        model = Embedder()
        model.embed_queries = model.embed  # symmetric
        return model
    from rag.embedders_extra import load

    return load(key, threads=threads)


def worker(key: str, data: Path, out: Path, threads: int, ingest_sample: int) -> None:
    """Embed the passages and queries of ``data`` (one corpus's texts) with ``key``; write the
    vectors to ``out.npz`` and the costs to ``out.json``."""
    texts = json.loads(data.read_text(encoding="utf-8"))
    passages, chunk_texts, queries = texts["passages"], texts["chunks"], texts["queries"]
    base = _rss_mb()[0]
    started = time.perf_counter()
    model = _load(key, threads)
    model.embed(passages[:2])  # warm (a lazy model loads here)
    load_s = time.perf_counter() - started
    p_vecs, wall, cpu = _timed(lambda: model.embed(passages))
    model.embed_queries(queries[:1])
    q_vecs, q_ms, q_cpu_ms = [], [], []
    for q in queries:
        vec, q_wall, q_cpu = _timed(lambda q=q: model.embed_queries([q])[0])
        q_vecs.append(vec)
        q_ms.append(q_wall * 1000)
        q_cpu_ms.append(q_cpu * 1000)
    stats = {
        "name": model.name,
        "dim": int(model.dim),
        "load_s": load_s,
        "chunks": len(passages),
        "wall_s": wall,
        "cpu_s": cpu,
        "query_ms": q_ms,
        "query_cpu_ms": q_cpu_ms,
        "rss_base_mb": base,
        "rss_peak_mb": _rss_mb()[1],
    }
    if key == "minilm" and ingest_sample:  # today's ingest pass: chunk and piece vectors
        from rag.bm25_tokenizer import Tokenizer
        from rag.piece_vectors import build_pieces

        step = max(1, len(passages) // ingest_sample)
        some, own = passages[::step], chunk_texts[::step]
        tokenizer = Tokenizer()
        tokenizer.tokenize_many(own[:2])
        _, wall, cpu = _timed(lambda: build_pieces(model, some, own, tokenizer))
        stats.update(ingest_chunks=len(some), ingest_wall_s=wall, ingest_cpu_s=cpu)
    np.savez(out.with_suffix(".npz"), passages=p_vecs, queries=np.asarray(q_vecs, np.float32))
    out.with_suffix(".json").write_text(json.dumps(stats), encoding="utf-8")


def run_worker(
    key: str, data: Path, out: Path, threads: int, ingest_sample: int
) -> tuple[dict, np.ndarray, np.ndarray]:
    """``worker`` in a fresh process (its own memory peak, its own threads), unless ``out``
    holds its results already."""
    if not out.with_suffix(".json").is_file():
        names = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
        env = {**os.environ, **dict.fromkeys(names, str(threads))}
        cmd = [sys.executable, "-m", "appliance.bench.embedder_bench", "--worker", key]
        cmd += ["--data", str(data), "--out", str(out), "--threads", str(threads)]
        cmd += ["--ingest-sample", str(ingest_sample)]
        subprocess.run(cmd, env=env, cwd=REPO, check=True)
    with np.load(out.with_suffix(".npz")) as z:
        vecs = z["passages"], z["queries"]
    return json.loads(out.with_suffix(".json").read_text(encoding="utf-8")), *vecs
