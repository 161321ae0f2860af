"""Smoke test: ``appliance bench index --quick`` runs and prints its table."""

from __future__ import annotations

import os
import subprocess
import sys

from support.paths import REPO


def test_bench_index_quick_prints_its_table() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    out = subprocess.run(
        [sys.executable, "-m", "appliance.cli", "bench", "index", "--quick"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert "| corpus" in out and "hybrid query p50 / p95" in out
    assert "dense recall@10 vs exact (hnsw)" in out and "synthetic" in out
    # the office formats, and OCR (or why it could not run)
    assert all(f"| {fmt} " in out for fmt in ("XLSX", "CSV", "HWPX"))
    assert "| OCR " in out
