"""``appliance bench ordering``: the --quick run prints its tables; the QA scoring runs on the
real engine over the sample corpus."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from appliance.bench.ordering_engine import qa_items, qa_run

REPO = Path(__file__).resolve().parent.parent


def test_bench_ordering_quick_prints_its_tables(model_dir: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    env["APPLIANCE_ENGINE__MODEL_PATH"] = str(model_dir)
    env["APPLIANCE_PATHS__DATA_DIR"] = str(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "appliance.cli", "bench", "ordering", "--quick"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    ).stdout
    assert "| capacity | strategy" in out and "| 8,000    | prefix" in out
    for name in ("relevance", "doc_id", "prefix"):
        assert f"| {name} " in out
    assert "| strategy     | hit ratio | prefill tokens | TTFT p50" in out
    assert "| hit ratio >= 0.74 (prefix)" in out and "TTFT p50 <= 0.6 x relevance" in out


def test_qa_scoring_counts_citations_of_the_gold_chunk(appliance, engine) -> None:  # noqa: ANN001
    items = qa_items(2)
    retrieved = [appliance.knowledge.retrieve(i["question"], 4)[0] for i in items]
    system = appliance.config.chat.system_prompt
    quality = qa_run(engine, items, retrieved, system, ["relevance", "prefix"], 16384, 8)
    for q in quality.values():
        assert q.questions == 2 and q.retrieved == 2  # both gold chunks are retrieved
        assert 0 <= q.hits <= q.grounded <= q.retrieved and 0.0 <= q.grounded_score <= 100.0
