"""The tuned SGLang launches, read by SGLang's own argument parser (sglang 0.5.23's
``prepare_server_args``, what ``sglang.launch_server`` calls first), from a scratch venv that
``scripts/sglang_args_env.sh`` builds (``scripts/test.sh`` builds it before the suite).

Every worker of every box below must parse, and SGLang must read back the values we meant:
a flag SGLang renamed or dropped, or a value it reads differently, fails here, not on the
customer's GPU box. SGLang's resolution pass (``ServerArgs.resolve_once``, where the HiCache and
NGRAM rules live) needs transformers, the model and a GPU platform, so it is not run here: the
rules it enforces are cited in ``engine/sglang/hicache.py`` and ``speculative.py``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support.paths import REPO
from test_sglang_tuning import _box, gpus, shape

from engine.sglang.tuning import SiteNeeds, tune

SGLANG_PYTHON = Path(
    os.environ.get("APPLIANCE_SGLANG_PYTHON", REPO / ".cache" / "sglang-args" / "bin" / "python")
)
pytestmark = pytest.mark.skipif(
    not SGLANG_PYTHON.exists(),
    reason=f"SGLang's argument parser is not installed ({SGLANG_PYTHON}): run "
    "`bash scripts/sglang_args_env.sh` (it downloads the sglang wheel)",
)

# runs under the scratch venv: each argv through SGLang's parser, the values read back as JSON
READ_BACK = """
import json, sys
from sglang.srt.server_args import prepare_server_args
fields = json.loads(sys.argv[1])
out = []
for argv in json.load(sys.stdin):
    args = prepare_server_args(argv)
    out.append({f: getattr(args, f) for f in fields})
print(json.dumps(out))
"""

# flag -> ServerArgs field
FIELDS = {
    "--model-path": "model_path",
    "--served-model-name": "served_model_name",
    "--host": "host",
    "--port": "port",
    "--nccl-port": "nccl_port",
    "--tp-size": "tp_size",
    "--context-length": "context_length",
    "--mem-fraction-static": "mem_fraction_static",
    "--max-running-requests": "max_running_requests",
    "--chunked-prefill-size": "chunked_prefill_size",
    "--schedule-policy": "schedule_policy",
    "--radix-eviction-policy": "radix_eviction_policy",
    "--grammar-backend": "grammar_backend",
    "--hicache-size": "hicache_size",
    "--hicache-write-policy": "hicache_write_policy",
    "--hicache-io-backend": "hicache_io_backend",
    "--hicache-mem-layout": "hicache_mem_layout",
    "--page-size": "page_size",
    "--speculative-algorithm": "speculative_algorithm",
    "--speculative-num-draft-tokens": "speculative_num_draft_tokens",
    "--speculative-ngram-max-bfs-breadth": "speculative_ngram_max_bfs_breadth",
    "--speculative-ngram-max-trie-depth": "speculative_ngram_max_trie_depth",
}
SWITCHES = {
    "--enable-metrics": "enable_metrics",
    "--enable-cache-report": "enable_cache_report",
    "--enable-hierarchical-cache": "enable_hierarchical_cache",
}


def _boxes() -> dict[str, list]:
    """Every launch shape the tuning makes: one GPU, split boxes, one worker over several GPUs,
    HiCache on, a tight KV budget."""
    site = SiteNeeds(32768, 32, 64)
    plans = {
        "h100 8b": tune(gpus("h100"), shape("8b"), site, model_path="/models/8b"),
        "h200 8b hicache": tune(
            gpus("h200"), shape("8b"), SiteNeeds(32768, 32, 1024), model_path="/models/8b"
        ),
        "2xh100 8b (2 workers)": tune(gpus("2xh100"), shape("8b"), site, model_path="/m/8b"),
        "2xh100 32b (tp 2)": tune(gpus("2xh100"), shape("32b"), site, model_path="/m/32b"),
        "8xh100 8b (8 workers)": tune(_box(8), shape("8b"), site, model_path="/m/8b"),
        "l40s 8b tight": tune(
            gpus("l40s"), shape("8b"), SiteNeeds(32768, 64, 64), model_path="/m/8b"
        ),
        "h100 8b ngram": tune(
            gpus("h100"), shape("8b"), site, model_path="/m/8b", speculative="ngram"
        ),
        "h200 8b hicache ngram": tune(
            gpus("h200"),
            shape("8b"),
            SiteNeeds(32768, 32, 1024),
            model_path="/m/8b",
            speculative="ngram",
        ),
        "2xh100 32b (tp 2) hicache": tune(
            gpus("2xh100"), shape("32b"), SiteNeeds(32768, 32, 768), model_path="/m/32b"
        ),
    }
    return {name: list(plan.workers) for name, plan in plans.items()}


def test_sglang_reads_every_tuned_launch_as_meant() -> None:
    workers = [(name, w) for name, ws in _boxes().items() for w in ws]
    argvs = []
    for _name, worker in workers:
        assert list(worker.argv[1:3]) == ["-m", "sglang.launch_server"]
        argvs.append(list(worker.argv[3:]))
    fields = [*FIELDS.values(), *SWITCHES.values()]
    done = subprocess.run(
        [str(SGLANG_PYTHON), "-c", READ_BACK, json.dumps(fields)],
        input=json.dumps(argvs),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    read = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(read) == len(workers) == 1 + 1 + 2 + 1 + 8 + 1 + 1 + 1 + 1
    ports = set()
    for (name, worker), values in zip(workers, read, strict=True):
        argv = list(worker.argv)
        for flag, field in FIELDS.items():
            if flag not in argv:
                continue
            meant = argv[argv.index(flag) + 1]
            got = values[field]
            if isinstance(got, float):
                assert got == float(meant), (name, flag)
            else:
                assert str(got) == meant, (name, flag, got)
        for flag, field in SWITCHES.items():
            assert values[field] is (flag in argv), (name, flag)
        ports |= {values["port"], values["nccl_port"]}
        if "--speculative-algorithm" in argv:
            # NGRAM's draft tree (topk = breadth > 1) refuses a page size > 1 outside
            # flashinfer (sglang 0.5.23 speculative_hook.py _handle_ngram); mixed chunk is off
            assert values["page_size"] is None and "--enable-mixed-chunk" not in argv, name
    # the HiCache boxes really run HiCache with page size and write policy; NGRAM boxes NGRAM
    named = {n: v for (n, _w), v in zip(workers, read, strict=True)}
    assert named["h200 8b hicache"]["page_size"] == 64
    assert named["h200 8b hicache"]["hicache_write_policy"] == "write_through"
    assert named["h200 8b hicache ngram"]["enable_hierarchical_cache"] is True
    assert named["h100 8b ngram"]["speculative_algorithm"] == "NGRAM"
    assert named["h100 8b ngram"]["max_running_requests"] <= 48
    # no two workers of a box share a port (HTTP or NCCL) across the whole table's 8-way box
    eight = [v for (n, _w), v in zip(workers, read, strict=True) if n.startswith("8x")]
    assert len({v["port"] for v in eight} | {v["nccl_port"] for v in eight}) == 16
