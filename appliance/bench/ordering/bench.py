"""``appliance bench ordering``: context ordering strategies side by side, in one run.

1. Simulator: a generated multi-session RAG workload (shared ~1k-token system prompt, Zipf
   topic popularity, 1-5 turns per session, interleaved) replayed through a token-level radix
   LRU cache at several capacities, tokenised with the engine's tokenizer. Per strategy: hit
   ratio, prefill tokens, ratios vs ContextPilot and vs relevance order. Each turn's retrieval
   also ranks ``--riders`` candidates beyond the top-k: ``prefix`` runs without cache riders,
   ``prefix+rider`` may send cached candidates along; the other strategies ignore them.
   ``--fractions`` sizes the caches as shares of the corpus (0.1,0.25,1.0: from a tenth of
   the documents to all of them) and ``--shape`` changes the workload (``make_workload``'s
   knobs: more follow-ups, more chunks per request, more overlap between users, ...).
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
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from appliance.bench.ordering.engine_report import on_engine
from appliance.bench.ordering.replay import ADAPTIVE_ROW, RELAY_ROW, RIDERS
from appliance.bench.table import render
from appliance.core.config import AppConfig

if TYPE_CHECKING:  # heavy imports happen only when the suite runs
    from appliance.bench.ordering.replay import Variant
    from appliance.bench.ordering.workload import Workload
    from engine.embedded.engine import EmbeddedEngine

# cache sizes in tokens: below the workload's working set (the cache holds about five prompts),
# the embedded engine's default KV budget, and on to what a GPU profile holds
CAPACITIES = "16000,32768,64000,256000,1000000"
ENGINE_STRATEGIES = ("relevance", "contextpilot", "prefix", RIDERS, ADAPTIVE_ROW)


def variants(strategies: list[str], riders: int) -> list[Variant]:
    """Every strategy once (offered the candidates; only riders-takers use them), and ``prefix``
    both without cache riders and, when ``riders``, with at most ``riders`` per turn; then
    ``prefix`` (with the riders) re-laying every follow-up, and choosing per turn
    (``rag.layout``)."""
    from appliance.bench.ordering.replay import Variant

    out = []
    for name in strategies:
        if name == "prefix":
            out.append(Variant(name, name, 0))
            if riders:
                out.append(Variant(RIDERS, name, riders))
            out.append(Variant(RELAY_ROW, name, riders, "relay"))
            out.append(Variant(ADAPTIVE_ROW, name, riders, "adaptive"))
        else:
            out.append(Variant(name, name))
    return out


def main(argv: list[str], config: AppConfig) -> int:
    parser = argparse.ArgumentParser(prog="appliance bench ordering")
    parser.add_argument("--quick", action="store_true", help="a small, fast run (smoke test)")
    parser.add_argument("--sessions", type=int, default=0, help="simulated sessions")
    parser.add_argument("--capacities", default="", help="cache sizes in tokens, comma-separated")
    parser.add_argument(
        "--fractions",
        default="",
        help="cache sizes as shares of the corpus's chunk tokens, comma-separated (e.g. "
        "0.1,0.25,1.0); replaces --capacities",
    )
    parser.add_argument(
        "--shape",
        default="",
        help="workload knobs, key=value comma-separated (make_workload's: top_k, topics, "
        "chunks_per_topic, multi_turn_share, max_turns, foreign_share, drift, ...)",
    )
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
    # 60 turns: enough that the 32k-token cache evicts and the layouts part (at 30 it holds
    # every conversation, and every layout appends)
    engine_turns = args.engine_turns if args.engine_turns >= 0 else (2 if args.quick else 60)
    qa = args.qa if args.qa >= 0 else (0 if args.quick else 24)
    answer_tokens = 16 if args.quick else 48
    # --quick: short texts too, so the engine part takes seconds
    shape = {"topics": 12, "chunk_words": 20, "system_words": 40, "answer_words": 8}
    shape = {**(shape if args.quick else {}), **parse_shape(args.shape)}
    fractions = [float(f) for f in args.fractions.split(",") if f]
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
            fractions=fractions,
            gateway=Gateway(
                args.gateway_turns if args.gateway_turns >= 0 else (0 if args.quick else 40),
                args.gateway_workers,
                args.gateway_kv,
                args.gateway_port,
            ),
        )
    )
    return 0


def parse_shape(text: str) -> dict[str, int | float]:
    """``key=value,...`` as make_workload's keyword arguments (ints where they parse)."""
    out: dict[str, int | float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, _, value = item.partition("=")
        if not value:
            raise SystemExit(f"--shape: {item!r} is not key=value")
        out[key.strip()] = int(value) if value.strip().lstrip("-").isdigit() else float(value)
    return out


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
    fractions: list[float] | None = None,
) -> str:
    """The whole suite's report; with ``fractions``, the simulator's cache sizes are those
    shares of the corpus's chunk tokens (instead of ``capacities``)."""
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
        corpus = sum(c.token_count or 0 for c in workload.chunks)
        if fractions:
            capacities = [max(1, int(f * corpus)) for f in fractions]
        rows = variants(default_ordering().names(), riders)
        out = [
            f"workload: {workload.sessions()} sessions, {len(workload.turns)} turns, "
            f"system prompt {engine.count_tokens(workload.system_prompt)} tokens, "
            f"{len(workload.chunks)} chunks of ~{workload.chunks[0].token_count} tokens "
            f"({corpus:,} in all; cache sizes {', '.join(f'{c:,}' for c in capacities)}), "
            f"{intents or 'no'} recurring questions per topic, {riders} candidates beyond the "
            f"top-k per turn{''.join(f', {k}={v}' for k, v in (shape or {}).items())}; "
            f"tokenizer: {model_dir.name}"
        ]
        table, targets = simulate(engine, workload, capacities, rows)
        out.append(table)
        # pages at the engine's default budget (where the layouts differ most) and the largest
        paged = sorted({min(capacities, key=lambda c: abs(c - 32_768)), max(capacities)})
        out.append(granularity(engine, workload, paged, rows))
        names = [v for n in ENGINE_STRATEGIES for v in rows if v.label == n]
        if engine_turns or qa:
            table, more = on_engine(
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
