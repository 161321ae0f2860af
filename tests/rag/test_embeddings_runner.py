"""``Embedder``'s ``runner``, and the appliance's use of it: an embedding leaves no OpenMP team
on the thread that asked for it, so the engine's OpenMP workers keep spinning (``omp.py``)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np

from appliance.core.config import AppConfig
from appliance.wiring.appliance import build_embedder
from rag.embeddings import Embedder


def _threads() -> int:
    """The process's OS threads, once their number has held still for 0.3 s (threads that
    ended, and the OpenMP workers they take with them, leave asynchronously)."""
    count, since = len(os.listdir("/proc/self/task")), time.monotonic()
    deadline = since + 10
    while time.monotonic() - since < 0.3 and time.monotonic() < deadline:
        time.sleep(0.05)
        now = len(os.listdir("/proc/self/task"))
        if now != count:
            count, since = now, time.monotonic()
    return count


def _threads_left_by(embed) -> int:  # noqa: ANN001
    """OS threads the process holds while a long-lived thread (a request worker) that called
    ``embed`` is still alive, beyond the worker itself."""
    embed()  # first use: whatever a model starts once (tokenizer pools) is started
    before = _threads()
    done, stop = threading.Event(), threading.Event()

    def worker() -> None:
        embed()
        done.set()
        stop.wait()

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        assert done.wait(60)
        return _threads() - before - 1
    finally:
        stop.set()
        thread.join()


def test_a_runner_takes_the_work_off_the_calling_thread(embedder: Embedder) -> None:
    seen: list[str] = []

    def runner(work):  # noqa: ANN001, ANN202
        seen.append("ran")
        return work()

    own = Embedder(runner=runner)
    own.model = embedder.model  # the session's loaded model
    vecs = own.embed(["a password reset", "annual leave"])
    pieces = own.embed_with_spans(["a password reset"], [[(2, 10)]])
    assert seen == ["ran", "ran"]
    assert np.allclose(vecs, embedder.embed(["a password reset", "annual leave"]), atol=1e-5)
    assert pieces[1][0].shape == (1, embedder.dim)


def test_the_appliance_embedder_leaves_no_openmp_team_behind(tmp_path: Path) -> None:
    config = AppConfig(paths={"data_dir": tmp_path})
    wired = build_embedder(config)
    plain = Embedder(config.rag.embedding_model_path)
    text = ["how do I reset my VPN password?"] * 8
    # a plain embedder run on a long-lived thread keeps that thread's OpenMP worker(s) alive
    assert _threads_left_by(lambda: plain.embed(text)) >= 1
    assert _threads_left_by(lambda: wired.embed(text)) == 0
