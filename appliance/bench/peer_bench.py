"""``appliance bench engine --peer vllm``: the appliance's CPU engine and vLLM CPU, side by side.

Both run as HTTP servers on this machine, one after the other (never at once, so neither takes
the other's cores), started by this command: ``appliance engine-server`` (the appliance's CPU
profile) and vLLM's OpenAI server from a separate Python environment (``--peer-python``).
Both get the very same token-id requests (``peer_workload.py``). The table shows each side,
the ratio appliance / vLLM, and the issue's targets.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from appliance.bench.peer_server import ManagedServer
from appliance.bench.peer_workload import ServerResult, Workload, run_workload
from appliance.bench.table import render
from appliance.core.config import SAMPLE_CORPUS

PREFIX, SUFFIX, NEW, STREAMS = 1500, 50, 64, 8
COLD_RUNS = 3  # cold TTFT is the median of this many cold prompts
TARGET = 0.8  # issue #34: at most 0.8x vLLM CPU on every column


@dataclass(frozen=True)
class Side:
    name: str
    result: ServerResult
    startup_s: float | None  # None: the server was already running
    peak_rss: int | None
    load: str  # load average while it ran


def build_workload(model_dir: Path, quick: bool = False) -> Workload:
    from transformers import AutoTokenizer

    prefix_len, suffix_len, new, streams = PREFIX, SUFFIX, NEW, STREAMS
    if quick:
        prefix_len, suffix_len, new, streams = 200, 20, 8, 4
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    text = "\n\n".join(p.read_text(encoding="utf-8") for p in sorted(SAMPLE_CORPUS.glob("*.md")))
    ids = list(tok(text, add_special_tokens=False).input_ids)
    need = prefix_len + (streams + 2) * (suffix_len + 10) + streams * 40 + prefix_len
    if len(ids) < need:
        raise ValueError(f"the sample corpus has {len(ids)} tokens; the workload needs {need}")
    prefix = ids[: prefix_len - 1]
    suffixes = [
        ids[prefix_len + i * (suffix_len + 10) : prefix_len + i * (suffix_len + 10) + suffix_len]
        for i in range(streams + 2)
    ]
    # a distinct first token per phase keeps each phase cold on both servers
    heads = iter(range(1000, 1100))
    cold = [[next(heads), *prefix, *suffixes[0]] for _ in range(COLD_RUNS)]
    warm = [cold[0][0], *prefix, *suffixes[1]]
    distinct = [
        [next(heads), *ids[40 * i + 3 : 40 * i + 3 + prefix_len + suffix_len - 1]]
        for i in range(streams)
    ]
    head = next(heads)
    shared = [[head, *prefix, *s] for s in suffixes[2:]]
    return Workload(
        warmup=[next(heads), *ids[:16]],
        cold=cold,
        warm=warm,
        distinct=distinct,
        shared=shared,
        new_tokens=new,
    )


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def run_side(
    name: str, server: ManagedServer | None, base: str, work: Workload, timeout_s: float
) -> Side:
    startup = server.start(timeout_s) if server else None
    try:
        before = _load()
        result = run_workload(base, work)
        load = f"{before} -> {_load()}"
    finally:
        if server:
            server.stop()
    return Side(name, result, startup, server.peak_rss if server else None, load)


def ours_server(model_dir: Path, port: int, threads: int, log_dir: Path) -> ManagedServer:
    env = {
        "APPLIANCE_ENGINE__MODEL_PATH": str(model_dir),
        "APPLIANCE_ENGINE__THREADS": str(threads),
        "APPLIANCE_ENGINE__MAX_RUNNING_REQUESTS": str(STREAMS),
    }
    cmd = [sys.executable, "-m", "appliance.cli", "engine-server", "--port", str(port)]
    return ManagedServer(
        "appliance engine-server",
        cmd,
        f"http://127.0.0.1:{port}/health",
        env=env,
        log_path=log_dir / "appliance-engine-server.log",
    )


def vllm_server(
    python: str,
    model_dir: Path,
    port: int,
    cpus: str,
    kv_gb: int,
    log_dir: Path,
    dtype: str = "auto",
) -> ManagedServer:
    """vLLM's OpenAI server; ``dtype`` is its ``--dtype`` ("auto" takes the model's bfloat16,
    which a CPU without AVX-512 BF16 emulates: "float32" is then the like-for-like run)."""
    cmd = [
        python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_dir),
        "--served-model-name",
        model_dir.name,
        "--port",
        str(port),
        "--enable-prefix-caching",
        "--enable-prompt-tokens-details",
        "--dtype",
        dtype,
    ]
    env = {
        "VLLM_CPU_OMP_THREADS_BIND": cpus,
        "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
        "VLLM_CPU_KVCACHE_SPACE": str(kv_gb),
    }
    return ManagedServer(
        "vLLM CPU", cmd, f"http://127.0.0.1:{port}/health", env=env, log_path=log_dir / "vllm.log"
    )


def _ratio(ours: float, peer: float) -> str:
    return f"{ours / peer:.2f}x" if peer else "-"


def _met(ok: bool) -> str:
    return "yes" if ok else "NO"


def _spread(median: float, samples: list[float]) -> str:
    return f"{median:.2f} s ({min(samples):.2f}-{max(samples):.2f})"


def render_sides(peer: Side, ours: Side, work: Workload) -> str:
    p, o = peer.result, ours.result
    n, new = len(work.distinct), work.new_tokens
    plen = len(work.cold[0])
    shared = next(i for i, (a, b) in enumerate(zip(work.cold[0], work.warm, strict=True)) if a != b)
    rows = []
    if ours.startup_s is not None:
        ps = f"{peer.startup_s:.1f} s" if peer.startup_s is not None else "(running)"
        rows.append(
            ("start-up to healthy", ps, f"{ours.startup_s:.1f} s", "", "<= 60 s",
             _met(ours.startup_s <= 60))
        )  # fmt: skip
    rows += [
        (
            f"cold TTFT, {plen} tokens (median of {len(work.cold)})",
            _spread(p.cold_ttft_s, [s.ttft_s for s in p.cold]),
            _spread(o.cold_ttft_s, [s.ttft_s for s in o.cold]),
            _ratio(o.cold_ttft_s, p.cold_ttft_s),
            f"<= {TARGET}x",
            _met(o.cold_ttft_s <= TARGET * p.cold_ttft_s),
        ),
        (
            "warm TTFT (same prefix, new suffix)",
            f"{p.warm.ttft_s:.3f} s ({p.warm.cached_tokens} cached)",
            f"{o.warm.ttft_s:.3f} s ({o.warm.cached_tokens} cached)",
            _ratio(o.warm.ttft_s, p.warm.ttft_s),
            f"<= {TARGET}x, {shared} cached",
            _met(o.warm.ttft_s <= TARGET * p.warm.ttft_s and o.warm.cached_tokens >= shared),
        ),
    ]
    for label, a, b in (
        (f"{n} distinct x {plen} -> {new}", p.distinct, o.distinct),
        (f"{n} sharing a prefix x {plen} -> {new}", p.shared, o.shared),
    ):
        rows.append(
            (
                label,
                f"{a.wall_s:.1f} s, {a.tokens_per_s:.0f} tok/s, {a.cached} cached",
                f"{b.wall_s:.1f} s, {b.tokens_per_s:.0f} tok/s, {b.cached} cached",
                _ratio(b.wall_s, a.wall_s),
                f"<= {TARGET}x",
                _met(b.wall_s <= TARGET * a.wall_s),
            )
        )
    if peer.peak_rss is not None and ours.peak_rss is not None:
        rows.append(
            ("peak RSS (process tree)", f"{peer.peak_rss / 2**30:.2f} GB",
             f"{ours.peak_rss / 2**30:.2f} GB", _ratio(ours.peak_rss, peer.peak_rss),
             f"<= {TARGET}x", _met(ours.peak_rss <= TARGET * peer.peak_rss))
        )  # fmt: skip
    headers = ("measure", peer.name, ours.name, "ratio", "target", "met")
    notes = f"load average (1/5/15 min) during vLLM: {peer.load}; during the appliance: {ours.load}"
    return render(headers, rows) + "\n" + notes


def run_peer_bench(
    model_dir: Path,
    *,
    peer_python: str | None,
    peer_url: str | None,
    ours_url: str | None,
    threads: int,
    cpus: str,
    kv_gb: int,
    timeout_s: float,
    quick: bool,
    peer_dtype: str = "auto",
) -> str:
    work = build_workload(model_dir, quick)
    log_dir = Path(tempfile.mkdtemp(prefix="bench-peer-"))
    if peer_url:
        peer = run_side("vLLM CPU", None, peer_url, work, timeout_s)
    else:
        if not peer_python or not os.path.exists(peer_python):
            raise SystemExit("--peer vllm needs --peer-python (with vllm-cpu) or --peer-url")
        server = vllm_server(peer_python, model_dir, 8731, cpus, kv_gb, log_dir, peer_dtype)
        peer = run_side("vLLM CPU", server, "http://127.0.0.1:8731", work, timeout_s)
    if ours_url:
        ours = run_side("appliance (cpu)", None, ours_url, work, timeout_s)
    else:
        server = ours_server(model_dir, 8732, threads, log_dir)
        ours = run_side("appliance (cpu)", server, "http://127.0.0.1:8732", work, timeout_s)
    return (
        render_sides(peer, ours, work)
        + f"\n{threads} compute thread(s) each (vLLM bound to CPUs {cpus}, --dtype {peer_dtype});"
        + f" server logs: {log_dir}"
    )
