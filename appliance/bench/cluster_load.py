"""``appliance bench load --workers N``: one multi-session RAG load through each engine set-up,
side by side in one run, started and stopped by the bench on loopback:

1. one ``engine-server`` worker, asked directly (all CPU threads);
2. the same worker behind the gateway (smg); then the gateway's own cost on TTFT, from one
   cached prompt asked alone, directly and through the gateway in turn;
3. N workers behind the gateway with ``cache_aware`` routing (threads split);
4. N workers behind the gateway with ``round_robin``.

The load is the ordering benchmark's workload (Zipf topics, 1-5 turns a session, the history
appended turn after turn): ``--sessions`` sessions, ``--concurrency`` of them at once, each
turn streamed from ``/generate`` with ``--new-tokens`` tokens (end of sequence ignored, so each
set-up does the same work). Every set-up starts with an empty cache and meets the same turns.

Per set-up: cache hit rate and prefill tokens; TTFT p50/p95/p99; inter-token latency p50/p95;
errors; throughput; goodput (output tokens of the turns that met the latency objective:
TTFT <= ``--slo-ttft`` and mean ITL <= ``--slo-itl``); and cost per effective token (machine-
hour price x wall time / goodput tokens).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from appliance.bench.ordering.workload import Turn, make_workload
from appliance.bench.table import render
from appliance.core.config import AppConfig
from appliance.wiring.cluster import LocalCluster
from appliance.wiring.cluster_plan import plan_cluster
from rag.prompt import build_messages, number_chunks, render_user_turn


@dataclass
class TurnResult:
    ok: bool
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    ttft_s: float = 0.0
    itl_s: list[float] = field(default_factory=list)
    error: str = ""


@dataclass
class SetupResult:
    name: str
    turns: list[TurnResult]
    wall_s: float


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _stream_turn(http: httpx.Client, url: str, text: str, new_tokens: int) -> TurnResult:
    body = {
        "text": text,
        "stream": True,
        "sampling_params": {"max_new_tokens": new_tokens, "temperature": 0, "ignore_eos": True},
    }
    started = time.perf_counter()
    stamps: list[float] = []
    meta: dict = {}
    try:
        with http.stream("POST", f"{url}/generate", json=body) as r:
            if r.status_code != 200:
                r.read()
                return TurnResult(False, error=f"HTTP {r.status_code}")
            seen = 0
            for line in r.iter_lines():
                if not line.startswith("data:") or line.strip() == "data: [DONE]":
                    continue
                event = json.loads(line[5:])
                if "error" in event:
                    return TurnResult(False, error=str(event["error"])[:80])
                if len(event.get("text", "")) > seen:
                    seen = len(event["text"])
                    stamps.append(time.perf_counter())
                meta = event.get("meta_info") or meta
    except httpx.HTTPError as exc:
        return TurnResult(False, error=type(exc).__name__)
    if not stamps or not meta.get("finish_reason"):
        return TurnResult(False, error="no answer")
    return TurnResult(
        True,
        int(meta.get("prompt_tokens", 0)),
        int(meta.get("cached_tokens", 0)),
        int(meta.get("completion_tokens", 0)),
        stamps[0] - started,
        [b - a for a, b in zip(stamps, stamps[1:], strict=False)],
    )


def _session_texts(turns: list[Turn], system: str, render_chat) -> list[str]:  # noqa: ANN001
    """Each turn's prompt text: system | earlier turns | this turn's new documents and question
    (chunks keep their numbers; the history is appended, as the app sends it)."""
    known: dict[int, int] = {}
    history: list[tuple[str, str]] = []
    texts = []
    for turn in turns:
        new = [c for c in turn.retrieved if c.chunk_id not in known]
        numbered, citations = number_chunks(
            new, known, relevance=turn.retrieved, first_number=len(known) + 1
        )
        known.update({c.chunk_id: n for n, c in numbered})
        user = render_user_turn(turn.question, numbered, citations)
        texts.append(render_chat(build_messages(system, history, user)))
        history += [("user", user), ("assistant", turn.answer)]
    return texts


def run_setup(
    name: str, url: str, sessions: list[list[str]], concurrency: int, new_tokens: int
) -> SetupResult:
    """Every session's turns in order, ``concurrency`` sessions at a time."""
    results: list[TurnResult] = []
    lock = threading.Lock()

    def one(texts: list[str]) -> None:
        with httpx.Client(timeout=300) as http:
            for text in texts:
                result = _stream_turn(http, url, text, new_tokens)
                with lock:
                    results.append(result)

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, sessions))
    return SetupResult(name, results, time.perf_counter() - started)


def _row(r: SetupResult, slo_ttft: float, slo_itl: float, price: float) -> list[str]:
    ok = [t for t in r.turns if t.ok]
    prompt = sum(t.prompt_tokens for t in ok)
    cached = sum(t.cached_tokens for t in ok)
    ttft = [t.ttft_s * 1000 for t in ok]
    itl = [g * 1000 for t in ok for g in t.itl_s]
    output = sum(t.output_tokens for t in ok)
    good = sum(
        t.output_tokens
        for t in ok
        if t.ttft_s <= slo_ttft and (not t.itl_s or statistics.mean(t.itl_s) <= slo_itl)
    )
    cost = price * (r.wall_s / 3600) / good * 1e6 if good else float("inf")
    return [
        r.name,
        f"{100 * cached / prompt:.1f}%" if prompt else "-",
        f"{prompt - cached:,}",
        " / ".join(f"{_percentile(ttft, q):.0f}" for q in (0.5, 0.95, 0.99)),
        " / ".join(f"{_percentile(itl, q):.0f}" for q in (0.5, 0.95)),
        f"{100 * (len(r.turns) - len(ok)) / max(1, len(r.turns)):.1f}%",
        f"{output / r.wall_s:.1f}",
        f"{good:,} ({good / r.wall_s:.1f}/s)",
        f"{cost:.2f}",
    ]


def _cluster(
    config: AppConfig, model_dir: Path, workers: int, cpus: int, policy: str, port: int, tag: str
) -> LocalCluster:
    plan = plan_cluster(
        workers=workers,
        model_dir=model_dir,
        served_model_name=model_dir.name,
        cpus=cpus,
        gateway_port=port,
        policy=policy,
    )
    cluster = LocalCluster(plan, config.paths.data_dir / "bench-cluster" / tag)
    cluster.start()
    return cluster


def main(args: argparse.Namespace, config: AppConfig) -> int:
    from transformers import AutoTokenizer

    from engine.embedded.model_store import resolve_model_dir
    from engine.embedded.omp import run_in_own_thread

    e = config.engine
    model_dir = run_in_own_thread(lambda: resolve_model_dir(e.model_path, config.paths.models_dir))
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))

    def render_chat(messages: tuple[tuple[str, str], ...]) -> str:
        return tokenizer.apply_chat_template(
            [{"role": r, "content": c} for r, c in messages], tokenize=False,
            add_generation_prompt=True,
        )  # fmt: skip

    workload = make_workload(args.sessions, seed=args.seed)
    by_session: dict[int, list[Turn]] = {}
    for turn in workload.turns:
        by_session.setdefault(turn.session, []).append(turn)
    sessions = [
        _session_texts(turns, workload.system_prompt, render_chat) for turns in by_session.values()
    ]
    cpus = args.threads or os.cpu_count() or 1
    turns = sum(map(len, sessions))
    print(f"{len(sessions)} sessions, {turns} turns, {args.concurrency} at once", flush=True)
    results = []
    one = _cluster(config, model_dir, 1, cpus, "cache_aware", args.port, "one")
    try:
        worker = one.plan.worker_urls[0]
        for name, url in (("1 worker, direct", worker), ("1 worker via gateway", one.gateway_url)):
            httpx.post(f"{worker}/flush_cache", timeout=60)
            results.append(run_setup(name, url, sessions, args.concurrency, args.new_tokens))
        overhead = gateway_overhead(worker, one.gateway_url, sessions[0][0])
    finally:
        one.stop()
    for i, policy in enumerate(("cache_aware", "round_robin"), start=1):
        many = _cluster(config, model_dir, args.workers, cpus, policy, args.port + 10 * i, policy)
        try:
            name = f"{args.workers} workers, {policy}"
            results.append(
                run_setup(name, many.gateway_url, sessions, args.concurrency, args.new_tokens)
            )
        finally:
            many.stop()
    header = [
        "set-up", "cache hit", "prefill tokens", "TTFT p50/p95/p99 ms", "ITL p50/p95 ms",
        "errors", "output tok/s", "goodput tokens", f"cost per 1M good tok (${args.price}/h)",
    ]  # fmt: skip
    rows = [_row(r, args.slo_ttft, args.slo_itl, args.price) for r in results]
    print(render(header, rows))
    _targets(results, args, overhead)
    return 0


def gateway_overhead(worker: str, gateway: str, text: str, pairs: int = 15) -> tuple[float, float]:
    """Median TTFT (ms) of one cached prompt asked alone, directly and through the gateway,
    alternating (the load above queues turns, which hides a few milliseconds)."""
    direct: list[float] = []
    routed: list[float] = []
    with httpx.Client(timeout=120) as http:
        _stream_turn(http, worker, text, 1)  # cached from here on
        for _ in range(pairs):
            for url, into in ((worker, direct), (gateway, routed)):
                result = _stream_turn(http, url, text, 2)
                if result.ok:
                    into.append(result.ttft_s * 1000)
    return statistics.median(direct), statistics.median(routed)


def _hit(r: SetupResult) -> float:
    ok = [t for t in r.turns if t.ok]
    prompt = sum(t.prompt_tokens for t in ok)
    return sum(t.cached_tokens for t in ok) / prompt if prompt else 0.0


def _targets(
    results: list[SetupResult], args: argparse.Namespace, overhead: tuple[float, float]
) -> None:
    direct, _via, aware, robin = results
    alone, routed = overhead
    lines = [
        f"cache hit, {args.workers} workers cache_aware vs 1 worker: "
        f"{100 * (_hit(aware) - _hit(direct)):+.1f} points (target: within 5)",
        f"cache hit, cache_aware vs round_robin: {100 * (_hit(aware) - _hit(robin)):+.1f} points "
        "(target: at least +10)",
        f"gateway overhead on TTFT p50, a cached prompt alone: {routed - alone:+.1f} ms "
        f"({alone:.1f} ms direct, {routed:.1f} ms through the gateway; target: <= 5 ms)",
    ]
    print("\n".join(lines))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--concurrency", type=int, default=4, help="sessions at once (cluster load)")
    p.add_argument("--new-tokens", type=int, default=24, help="tokens per answer (cluster load)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="CPU threads to split (default: all)")
    p.add_argument("--port", type=int, default=32000, help="first port the set-ups may use")
    p.add_argument("--slo-ttft", type=float, default=2.0, help="goodput: TTFT objective, s")
    p.add_argument("--slo-itl", type=float, default=0.2, help="goodput: mean ITL objective, s")
    p.add_argument("--price", type=float, default=1.0, help="machine-hour price, $")
