"""CLI: print the tuned SGLang launch for this box and a model directory.

    python -m engine.sglang.plan --model-path /models/Llama-3.1-8B-Instruct
    python -m engine.sglang.plan --model-path DIR --print command   # one line per worker

Reads ``nvidia-smi`` (or ``--gpus-csv``, a recorded output) and ``DIR/config.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from engine.sglang.gpu_info import GIB, parse_nvidia_smi, read_gpus
from engine.sglang.model_shape import load_shape
from engine.sglang.tuning import BoxPlan, DoesNotFit, SiteNeeds, tune

CAPACITY_CONTEXTS = (2048, 4096, 8192, 16384, 32768, 65536, 131072)


def host_ram_gb(meminfo: Path = Path("/proc/meminfo")) -> float:
    """Total host RAM in GB (0 when unknown)."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024 / 1e9
    except OSError:
        pass
    return 0.0


def _hicache(size_gb: int, ratio: float | None, tp: int) -> str:
    if ratio is None:
        return "off"
    return f"{size_gb} GB per GPU x {tp} (host:GPU KV {ratio:g}), write-through"


def render_table(plan: BoxPlan) -> str:
    """A human-readable summary: workers, knobs, memory, and the capacity table."""
    one = plan.first
    groups = ", ".join(",".join(map(str, w.gpu_ids)) or "all" for w in plan.workers)
    rows = [
        ("profile", one.profile),
        ("workers", f"{len(plan.workers)} (GPUs: {groups})"),
        ("--tp-size", str(one.tp)),
        ("--mem-fraction-static", f"{one.mem_fraction_static:g}"),
        ("weights", f"{one.weights_bytes / GIB:.1f} GiB"),
        ("KV bytes/token", f"{one.kv_bytes_per_token:,}"),
        ("KV capacity", f"{plan.kv_capacity_tokens:,} tokens"),
        ("--max-running-requests", f"{one.max_running_requests} per worker"),
        ("--chunked-prefill-size", str(one.chunked_prefill_size)),
        ("--context-length", str(one.context_length)),
        ("hicache", _hicache(one.hicache_size_gb, one.hicache_ratio, one.tp)),
        ("--page-size", str(one.page_size)),
        ("speculative", one.speculative or "off"),
    ]
    width = max(len(k) for k, _ in rows)
    out = [f"{k:<{width}}  {v}" for k, v in rows]
    out += ["", f"{'context':>8}  sessions"]
    out += [
        f"{ctx:>8}  {plan.capacity(ctx)}" for ctx in CAPACITY_CONTEXTS if ctx <= one.context_length
    ]
    out += [f"warning: {w}" for w in plan.warnings]
    if plan.needs_gateway:
        out += ["", f"{len(plan.workers)} workers, behind the model gateway (cache-aware routing):"]
    out += ["", *plan.commands()]
    return "\n".join(out)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m engine.sglang.plan", description=__doc__)
    p.add_argument("--model-path", required=True, type=Path, help="offline model directory")
    p.add_argument("--context-length", type=int, default=32768)
    p.add_argument("--concurrency", type=int, default=32, help="expected concurrent sessions")
    p.add_argument("--avg-tokens", type=int, default=4096, help="average tokens per request")
    p.add_argument("--host-ram-gb", type=float, default=None, help="default: MemTotal")
    p.add_argument("--gpus-csv", type=Path, default=None, help="recorded nvidia-smi output")
    p.add_argument("--param-count", type=int, default=None, help="override the estimate")
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--python", default="python", help="interpreter in the command")
    p.add_argument(
        "--speculative",
        choices=["off", "ngram"],
        default="off",
        help="NGRAM speculative decoding (off until measured on this GPU)",
    )
    p.add_argument("--print", dest="what", choices=["table", "command", "json"], default="table")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    gpus = parse_nvidia_smi(args.gpus_csv.read_text()) if args.gpus_csv else read_gpus()
    if not gpus:
        print("no NVIDIA GPU found (nvidia-smi): use the embedded CPU engine", file=sys.stderr)
        return 2
    shape = load_shape(args.model_path, param_count=args.param_count)
    ram = args.host_ram_gb if args.host_ram_gb is not None else host_ram_gb()
    site = SiteNeeds(args.context_length, args.concurrency, ram, args.avg_tokens)
    try:
        plan = tune(
            gpus,
            shape,
            site,
            model_path=str(args.model_path),
            served_model_name=args.served_model_name,
            host=args.host,
            port=args.port,
            python=args.python,
            speculative="" if args.speculative == "off" else args.speculative,
        )
    except DoesNotFit as exc:
        print(f"does not fit: {exc}", file=sys.stderr)
        return 3
    if args.what == "command":
        print("\n".join(plan.commands()))
    elif args.what == "json":
        workers = [{**asdict(w), "command": w.command()} for w in plan.workers]
        box = {"workers": workers, "warnings": plan.warnings, "idle_gpus": plan.idle_gpus}
        print(json.dumps(box, indent=2))
    else:
        print(render_table(plan))
    return 0


if __name__ == "__main__":
    sys.exit(main())
