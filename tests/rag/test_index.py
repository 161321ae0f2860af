"""VectorIndex: exact search, the switch to HNSW, deletes and updates, atomic persistence."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from support.paths import REPO

from rag import ann
from rag.index import VectorIndex

DIM = 64


def unit(rows: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    return unit(5000)


@pytest.fixture(scope="module")
def ann_index(vectors: np.ndarray) -> VectorIndex:
    index = VectorIndex(DIM, "m", ann_threshold=1000)
    index.add(list(range(1, 501)), vectors[:500])
    assert index.kind == "flat"
    index.add(list(range(501, 5001)), vectors[500:])
    return index


def test_exact_search_finds_the_vector_itself() -> None:
    x = unit(50)
    index = VectorIndex(DIM, "m")
    index.add(list(range(100, 150)), x)
    assert index.kind == "flat" and index.size == 50
    hits = index.search(x[7], 3)
    assert hits[0][0] == 107 and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    assert len(index.search(x[0], 500)) == 50
    assert index.ids() == set(range(100, 150))


def test_add_switches_to_hnsw_at_the_threshold(ann_index: VectorIndex) -> None:
    assert ann_index.kind == "hnsw"
    assert ann_index.size == 5000 and ann_index.ids() == set(range(1, 5001))
    assert ann_index.ef_search in ann.EF_CANDIDATES


def test_ann_recall_at_10_vs_exact(ann_index: VectorIndex, vectors: np.ndarray) -> None:
    ids = np.arange(1, 5001)
    queries = unit(200, seed=1)
    truth = ann.exact_top_k(vectors, ids, queries, 10)
    found = np.array([[i for i, _ in ann_index.search(q, 10)] for q in queries])
    assert ann.recall_at_k(found, truth) >= 0.95


@pytest.mark.parametrize("kind_threshold", [20000, 100])
def test_delete_and_update(kind_threshold: int) -> None:
    x = unit(300, seed=2)
    index = VectorIndex(DIM, "m", ann_threshold=kind_threshold)
    index.add(list(range(1, 301)), x)
    assert index.remove([5, 6, 999]) == 2
    assert 5 not in {i for i, _ in index.search(x[4], 20)}
    assert index.size == 298 and 5 not in index.ids()
    # update = remove + add: id 7 now carries the vector of id 101
    index.remove([7])
    index.add([7], x[100:101])
    top = index.search(x[100], 2)
    assert {i for i, _ in top} == {7, 101}
    index.add([9], x[200:201])  # add of an existing id replaces it
    assert index.size == 298 and [i for i, _ in index.search(x[8], 1)] != [9]


def test_tombstones_compact_and_fall_back_to_flat() -> None:
    x = unit(1000, seed=3)
    index = VectorIndex(DIM, "m", ann_threshold=400)
    index.add(list(range(1000)), x)
    assert index.kind == "hnsw"
    index.remove(list(range(100)))
    assert index.tombstones == 100 and index.size == 900
    index.remove(list(range(100, 300)))  # past 20% dead: rebuilt without tombstones
    assert index.kind == "hnsw" and index.tombstones == 0 and index.size == 700
    index.remove(list(range(300, 900)))  # below half the threshold: exact again
    assert index.kind == "flat" and index.ids() == set(range(900, 1000))


def test_save_load_round_trip_flat_and_after_switch(tmp_path: Path, ann_index: VectorIndex) -> None:
    small = VectorIndex(DIM, "m")
    small.add([1, 2], unit(2))
    small.save(tmp_path / "flat")
    back = VectorIndex.load(tmp_path / "flat", DIM, "m")
    assert back is not None and back.kind == "flat" and back.ids() == {1, 2}

    ann_index.remove([42])
    ann_index.save(tmp_path / "hnsw")
    loaded = VectorIndex.load(tmp_path / "hnsw", DIM, "m")
    assert loaded is not None and loaded.kind == "hnsw"
    assert loaded.size == 4999 and loaded.tombstones == 1 and 42 not in loaded.ids()
    assert loaded.ef_search == ann_index.ef_search
    q = unit(1, seed=9)[0]
    assert loaded.search(q, 10) == ann_index.search(q, 10)
    assert VectorIndex.load(tmp_path / "hnsw", DIM, "other-model") is None


SAVER = """
import sys, time, numpy as np
from pathlib import Path
from rag.index import VectorIndex
out, n = Path(sys.argv[1]), 15000
x = np.random.default_rng(0).standard_normal((n, 256)).astype(np.float32)
index = VectorIndex(256, "m")
index.add(list(range(n)), x)
while True:
    print("saving", index.size, flush=True)
    start = time.perf_counter()
    index.save(out)
    print("saved", time.perf_counter() - start, flush=True)
    index.add([n], x[:1])
    n += 1
"""


def _kill_mid_save(directory: Path) -> bool:
    """Run the saver, SIGKILL it halfway through its second save; True if a temp file is left."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(SAVER), str(directory)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().split() == ["saving", "15000"]
        took = float(proc.stdout.readline().split()[1])  # the first save completed
        assert proc.stdout.readline().split() == ["saving", "15001"]
        time.sleep(took / 2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return any(p.name.startswith(".") for p in directory.iterdir())


def test_kill_during_save_leaves_a_loadable_index(tmp_path: Path) -> None:
    hit_mid_write = False
    for attempt in range(3):
        directory = tmp_path / str(attempt)
        hit_mid_write = _kill_mid_save(directory)
        loaded = VectorIndex.load(directory, 256, "m")
        assert loaded is not None and loaded.size in {15000, 15001}
        if hit_mid_write:
            break
    assert hit_mid_write, "the kill never landed inside a save"
