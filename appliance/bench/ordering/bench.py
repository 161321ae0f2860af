"""``appliance bench ordering``: context ordering strategies side by side, in one run.

1. Simulator: a generated multi-session RAG workload (shared ~1k-token system prompt, Zipf
   topic popularity, 1-5 turns per session, interleaved) replayed through a token-level radix
   LRU cache at several capacities, tokenised with the engine's tokenizer. Per strategy: hit
   ratio, prefill tokens, ratios vs ContextPilot and vs relevance order. Each turn's retrieval
   also ranks ``--riders`` candidates beyond the top-k: ``prefix`` runs without cache riders,
   ``prefix+rider`` may send cached candidates along; the other strategies ignore them.
2. Engine: a slice of the same workload through the embedded engine, for real: TTFT p50/p95.
3. Quality: the sample corpus's QA set; an answer scores when its [n] citations hit the gold
   chunk (an answer without any citation: when the chunk it quotes most is the gold one).
4. Gateway: a slice through ``engine-server`` workers behind smg (cache-aware routing), laid
   out by one shadow and then by a shadow per worker; how far each shadow's prediction of the
   cached tokens is from what the workers report (``gateway_shadow``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from appliance.bench.ordering.replay import RIDERS
from appliance.bench.table import fmt_ratio, render, yes
from appliance.core.config import AppConfig

if TYPE_CHECKING:  # heavy imports happen only when the suite runs
    from appliance.bench.ordering.replay import Variant
    from appliance.bench.ordering.workload import Workload
    from engine.embedded.engine import EmbeddedEngine

# cache sizes in tokens: below the workload's working set (the cache holds about five prompts),
# the embedded engine's default KV budget, and on to what a GPU profile holds
CAPACITIES = "16000,32768,64000,256000,1000000"
ENGINE_STRATEGIES = ("relevance", "contextpilot", "prefix", RIDERS)


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def _ms_p50(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} ms" if values else "-"


def variants(strategies: list[str], riders: int) -> list[Variant]:
    """Every strategy once (offered the candidates; only riders-takers use them), and ``prefix``
    both without cache riders and, when ``riders``, with at most ``riders`` per turn."""
    from appliance.bench.ordering.replay import Variant

    out = []
    for name in strategies:
        if name == "prefix":
            out.append(Variant(name, name, 0))
            if riders:
                out.append(Variant(RIDERS, name, riders))
        else:
            out.append(Variant(name, name))
    return out


def main(argv: list[str], config: AppConfig) -> int:
    parser = argparse.ArgumentParser(prog="appliance bench ordering")
    parser.add_argument("--quick", action="store_true", help="a small, fast run (smoke test)")
    parser.add_argument("--sessions", type=int, default=0, help="simulated sessions")
    parser.add_argument("--capacities", default="", help="cache sizes in tokens, comma-separated")
    parser.add_argument("--engine-turns", type=int, default=-1, help="turns on the real engine")
    parser.add_argument("--qa", type=int, default=-1, help="QA questions (0: skip)")
    parser.add_argument(
        "--intents",
        type=int,
        default=0,
        help="recurring questions per topic (0: every query draws a fresh chunk set)",
    )
    parser.add_argument(
        "--riders",
        type=int,
        default=6,
        help="candidates retrieved beyond the top-k per turn, and cache riders at most (0: off)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--gateway-turns", type=int, default=-1, help="turns behind the gateway (0: skip)"
    )
    parser.add_argument("--gateway-workers", type=int, default=2)
    parser.add_argument(
        "--gateway-kv", type=int, default=8192, help="KV budget per worker behind the gateway"
    )
    parser.add_argument("--gateway-port", type=int, default=34000, help="first port it may use")
    args = parser.parse_args(argv)
    sessions = args.sessions or (30 if args.quick else 400)
    capacities = [
        int(c) for c in (args.capacities or ("2000,8000" if args.quick else CAPACITIES)).split(",")
    ]
    engine_turns = args.engine_turns if args.engine_turns >= 0 else (2 if args.quick else 30)
    qa = args.qa if args.qa >= 0 else (0 if args.quick else 24)
    answer_tokens = 16 if args.quick else 48
    # --quick: short texts too, so the engine part takes seconds
    shape = {"topics": 12, "chunk_words": 20, "system_words": 40, "answer_words": 8}
    shape = shape if args.quick else {}
    print(
        run(
            config,
            sessions,
            capacities,
            engine_turns,
            qa,
            args.seed,
            answer_tokens,
            intents=args.intents,
            shape=shape,
            riders=args.riders,
            gateway=Gateway(
                args.gateway_turns if args.gateway_turns >= 0 else (0 if args.quick else 40),
                args.gateway_workers,
                args.gateway_kv,
                args.gateway_port,
            ),
        )
    )
    return 0


@dataclass(frozen=True)
class Gateway:
    """The gateway section's size: turns (0: skip), workers, KV per worker, first port."""

    turns: int = 0
    workers: int = 2
    kv_per_worker: int = 8192
    port: int = 34000


def run(
    config: AppConfig,
    sessions: int,
    capacities: list[int],
    engine_turns: int,
    qa: int,
    seed: int,
    answer_tokens: int = 48,
    intents: int = 0,
    shape: dict | None = None,
    riders: int = 6,
    gateway: Gateway | None = None,
) -> str:
    from appliance.bench.ordering.sim import granularity, simulate
    from appliance.bench.ordering.workload import make_workload
    from engine.embedded.engine import EmbeddedEngine
    from engine.embedded.model_store import resolve_model_dir
    from rag.ordering import default_ordering

    start = time.perf_counter()
    model_dir = resolve_model_dir(config.engine.model_path, config.paths.models_dir)
    engine = EmbeddedEngine(
        model_dir, kv_budget_tokens=config.engine.kv_budget_tokens, max_queue=64
    )
    try:
        workload = make_workload(
            sessions,
            seed=seed,
            intents=intents,
            candidates=riders,
            count_tokens=engine.count_tokens,
            **(shape or {}),
        )
        rows = variants(default_ordering().names(), riders)
        out = [
            f"workload: {workload.sessions()} sessions, {len(workload.turns)} turns, "
            f"system prompt {engine.count_tokens(workload.system_prompt)} tokens, "
            f"{len(workload.chunks)} chunks of ~{workload.chunks[0].token_count} tokens, "
            f"{intents or 'no'} recurring questions per topic, {riders} candidates beyond the "
            f"top-k per turn; tokenizer: {model_dir.name}"
        ]
        table, targets = simulate(engine, workload, capacities, rows)
        out.append(table)
        out.append(granularity(engine, workload, max(capacities), rows))
        names = [v for n in ENGINE_STRATEGIES for v in rows if v.label == n]
        if engine_turns or qa:
            table, more = _on_engine(
                config, engine, workload, names, engine_turns, qa, answer_tokens, riders
            )
            out += table
            targets += more
        if gateway is not None and gateway.turns:
            out += _behind_gateway(config, engine, workload, gateway)
        out.append(render(("target", "measured", "met"), targets))
        out.append(f"total {time.perf_counter() - start:.0f} s")
        return "\n".join(out)
    finally:
        engine.close()


def _behind_gateway(
    config: AppConfig, engine: EmbeddedEngine, workload: Workload, gateway: Gateway
) -> list[str]:
    """The shadow's prediction error behind smg, laid out by each shadow design in turn."""
    from appliance.bench.ordering import gateway_shadow as gs

    rows: list[list[str]] = []
    served = []
    for ordered_by in gs.ORDERED_BY:
        cpus = os.cpu_count() or 1
        plan = gs.gateway_plan(
            engine.model_dir, gateway.workers, gateway.kv_per_worker, gateway.port, cpus
        )
        result = gs.measure(
            workload,
            workload.turns[: gateway.turns],
            engine.render_chat,
            plan=plan,
            kv_per_worker=gateway.kv_per_worker,
            data_dir=config.paths.data_dir / "bench-gateway" / ordered_by.replace(" ", "-"),
            ordered_by=ordered_by,
        )
        rows += gs.render_result(result)
        served.append(" / ".join(str(n) for _w, n in sorted(result.requests_per_worker.items())))
    return [
        f"behind the gateway: {gateway.turns} turns through {gateway.workers} engine-server "
        f"workers behind smg (cache_aware), 4 sessions at a time, KV budget "
        f"{gateway.kv_per_worker:,} tokens per worker (small, so the shadows must follow "
        f"evictions); requests per worker: {'; '.join(served)}",
        render(gs.HEADERS, rows),
    ]


ENGINE_HEADERS = (
    "strategy",
    "hit ratio",
    "prefill tokens",
    "TTFT p50",
    "TTFT p95",
    "p50 vs relevance",
    "p50 first / follow-up",
    "[n] cites gold",
    "cites or quotes gold",
    "quality vs relevance (pts)",
    "riders slice/QA",
)


def _on_engine(
    config: AppConfig,
    engine: EmbeddedEngine,
    workload: Workload,
    names: list[Variant],
    engine_turns: int,
    qa: int,
    answer_tokens: int,
    riders: int = 0,
) -> tuple[list[str], list[tuple[str, str, str]]]:
    """TTFT on a slice of the workload, and QA quality, on the embedded engine."""
    kv = config.engine.kv_budget_tokens
    labels = [v.label for v in names]
    er = {}
    if engine_turns:
        er = _engine_slice(engine, workload, names, engine_turns, kv)
    quality = {}
    if qa:
        quality = _qa_quality(config, engine, names, qa, answer_tokens, riders)
    base_p50 = statistics.median(er["relevance"].ttfts) if er else 0.0
    base_q = quality["relevance"].grounded_score if quality else 0.0
    rows = [_engine_row(name, er, quality, base_p50, base_q) for name in labels]
    lines = [
        f"embedded engine: {len(workload.turns[:engine_turns])} turns of the workload, KV budget "
        f"{kv:,} tokens, one engine per strategy, turns interleaved; quality: {qa} QA "
        f"questions over the sample corpus in waves of 4, top-{config.rag.top_k} ({RIDERS}: "
        f"and the next {riders} of a top-{config.rag.top_k + riders} search as candidates); "
        "riders sent: on the slice / in QA",
        render(ENGINE_HEADERS, rows),
    ]
    return lines, _engine_targets(er, quality, base_p50, base_q)


def _engine_slice(
    engine: EmbeddedEngine,
    workload: Workload,
    names: list[Variant],
    engine_turns: int,
    kv: int,
) -> dict:
    """One engine per strategy (the same model and budget), played turn by turn."""
    from appliance.bench.ordering.engine import engine_run
    from engine.embedded.engine import EmbeddedEngine

    labels = [v.label for v in names]
    extra = [EmbeddedEngine(engine.model_dir, kv_budget_tokens=kv) for _ in names[1:]]
    try:
        engines = dict(zip(labels, [engine, *extra], strict=True))
        return engine_run(engines, workload, workload.turns[:engine_turns], kv, names)
    finally:
        for e in extra:
            e.close()


def _qa_quality(
    config: AppConfig,
    engine: EmbeddedEngine,
    names: list[Variant],
    qa: int,
    answer_tokens: int,
    riders: int,
) -> dict:
    """The sample corpus's QA set, per strategy."""
    from appliance.bench.ordering.engine import qa_items, qa_run, sample_corpus_retrieval
    from rag.embeddings import Embedder

    items = qa_items(qa)
    embedder = Embedder(config.rag.embedding_model_path)
    questions = [i["question"] for i in items]
    plain, deep = sample_corpus_retrieval(config, engine, embedder, questions, riders)
    system = config.chat.system_prompt
    kv = config.engine.kv_budget_tokens
    return qa_run(engine, items, plain, system, names, kv, answer_tokens, with_riders=deep, wave=4)


def _engine_row(name: str, er: dict, quality: dict, base_p50: float, base_q: float) -> tuple:
    r, q = er.get(name), quality.get(name)
    p50 = statistics.median(r.ttfts) if r else 0.0
    return (
        name,
        f"{r.hit_ratio:.3f}" if r else "-",
        f"{r.prefill_tokens:,}" if r else "-",
        f"{p50 * 1000:.0f} ms" if r else "-",
        f"{_p(r.ttfts, 0.95) * 1000:.0f} ms" if r else "-",
        fmt_ratio(p50, base_p50) if r else "-",
        " / ".join(_ms_p50(r.ttfts_of(f)) for f in (True, False)) if r else "-",
        f"{q.hits}/{q.questions}" if q else "-",
        f"{q.grounded}/{q.questions} ({q.retrieved} in prompt)" if q else "-",
        f"{q.grounded_score - base_q:+.1f}" if q else "-",
        f"{r.riders}/{q.riders if q else 0}" if r else (f"-/{q.riders}" if q else "-"),
    )


def _engine_targets(
    er: dict, quality: dict, base_p50: float, base_q: float
) -> list[tuple[str, str, str]]:
    targets = []
    for name in ("prefix", RIDERS):
        label = "" if name == "prefix" else f" ({RIDERS})"
        if er and name in er:
            ratio = statistics.median(er[name].ttfts) / base_p50 if base_p50 else 1.0
            targets.append(
                (f"TTFT p50 <= 0.6 x relevance{label}", f"{ratio:.3f}", yes(ratio <= 0.6))
            )
        if quality and name in quality:
            delta = quality[name].grounded_score - base_q
            targets.append(
                (f"quality >= relevance - 2 pts{label}", f"{delta:+.1f} pts", yes(delta >= -2))
            )
    return targets
