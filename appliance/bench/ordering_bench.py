"""``appliance bench ordering``: context ordering strategies side by side, in one run.

1. Simulator: a generated multi-session RAG workload (shared ~1k-token system prompt, Zipf
   topic popularity, 1-5 turns per session, interleaved) replayed through a token-level radix
   LRU cache at several capacities, tokenised with the engine's tokenizer. Per strategy: hit
   ratio, prefill tokens, ratios vs ContextPilot and vs relevance order.
2. Engine: a slice of the same workload through the embedded engine, for real: TTFT p50/p95.
3. Quality: the sample corpus's QA set; an answer scores when its [n] citations hit the gold
   chunk (an answer without any citation: when the chunk it quotes most is the gold one).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import TYPE_CHECKING

from appliance.bench.table import render
from appliance.config import AppConfig

if TYPE_CHECKING:  # heavy imports happen only when the suite runs
    from appliance.bench.ordering_workload import Workload
    from engine.embedded.engine import EmbeddedEngine

ENGINE_STRATEGIES = ("relevance", "contextpilot", "prefix")


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def _ratio(ours: float, base: float) -> str:
    return f"{ours / base:.3f}" if base else "-"


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"


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
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sessions = args.sessions or (30 if args.quick else 400)
    capacities = [
        int(c)
        for c in (args.capacities or ("2000,8000" if args.quick else "16000,64000,256000")).split(
            ","
        )
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
        )
    )
    return 0


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
) -> str:
    from appliance.bench.ordering_workload import make_workload
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
            sessions, seed=seed, intents=intents, count_tokens=engine.count_tokens, **(shape or {})
        )
        strategies = default_ordering().names()
        out = [
            f"workload: {workload.sessions()} sessions, {len(workload.turns)} turns, "
            f"system prompt {engine.count_tokens(workload.system_prompt)} tokens, "
            f"{len(workload.chunks)} chunks of ~{workload.chunks[0].token_count} tokens, "
            f"{intents or 'no'} recurring questions per topic; tokenizer: {model_dir.name}"
        ]
        table, targets = _simulate(engine, workload, capacities, strategies)
        out.append(table)
        names = [n for n in ENGINE_STRATEGIES if n in strategies]
        if engine_turns or qa:
            table, more = _on_engine(
                config, engine, workload, names, engine_turns, qa, answer_tokens
            )
            out += table
            targets += more
        out.append(render(("target", "measured", "met"), targets))
        out.append(f"total {time.perf_counter() - start:.0f} s")
        return "\n".join(out)
    finally:
        engine.close()


def _simulate(
    engine: EmbeddedEngine, workload: Workload, capacities: list[int], strategies: list[str]
) -> tuple[str, list[tuple[str, str, str]]]:
    """Every strategy through the radix simulator at every capacity: the table and targets."""
    from appliance.bench.ordering_radix import RadixLRU
    from appliance.bench.ordering_replay import PieceTokenizer, replay, simulator_backend
    from rag.ordering import default_ordering

    pieces = PieceTokenizer(engine.encode)
    rows, worst_vs_cp, best_hit = [], 0.0, 0.0
    for cap in capacities:
        results = {
            name: replay(
                workload,
                workload.turns,
                default_ordering(cap),
                name,
                simulator_backend(RadixLRU(cap), pieces),
            )
            for name in strategies
        }
        base, cp = results["relevance"], results.get("contextpilot")
        for name, r in results.items():
            rows.append(
                (
                    f"{cap:,}",
                    name,
                    f"{r.hit_ratio:.3f}",
                    f"{r.prefill_tokens:,}",
                    _ratio(r.prefill_tokens, cp.prefill_tokens) if cp else "-",
                    _ratio(r.prefill_tokens, base.prefill_tokens),
                    f"{r.first_turn_prefill:,}",
                    _ratio(r.first_turn_prefill, cp.first_turn_prefill) if cp else "-",
                )
            )
        ours = results["prefix"]
        best_hit = max(best_hit, ours.hit_ratio)
        if cp:
            worst_vs_cp = max(worst_vs_cp, ours.prefill_tokens / cp.prefill_tokens)
    headers = (
        "capacity",
        "strategy",
        "hit ratio",
        "prefill tokens",
        "vs contextpilot",
        "vs relevance",
        "1st-turn prefill",
        "1st-turn vs cp",
    )
    targets = [
        (
            "prefill <= 0.9 x contextpilot, every capacity",
            f"worst {worst_vs_cp:.3f}" if worst_vs_cp else "contextpilot not installed",
            _yes(0 < worst_vs_cp <= 0.9) if worst_vs_cp else "-",
        ),
        ("hit ratio >= 0.74 (prefix)", f"best {best_hit:.3f}", _yes(best_hit >= 0.74)),
    ]
    return render(headers, rows), targets


def _on_engine(
    config: AppConfig,
    engine: EmbeddedEngine,
    workload: Workload,
    names: list[str],
    engine_turns: int,
    qa: int,
    answer_tokens: int,
) -> tuple[list[str], list[tuple[str, str, str]]]:
    """TTFT on a slice of the workload, and QA quality, on the embedded engine."""
    from appliance.bench.ordering_engine import (
        engine_run,
        qa_items,
        qa_run,
        sample_corpus_retrieval,
    )
    from engine.embedded.engine import EmbeddedEngine

    kv = config.engine.kv_budget_tokens
    er = {}
    if engine_turns:
        # one engine per strategy (the same model and budget), played turn by turn
        extra = [EmbeddedEngine(engine.model_dir, kv_budget_tokens=kv) for _ in names[1:]]
        try:
            engines = dict(zip(names, [engine, *extra], strict=True))
            er = engine_run(engines, workload, workload.turns[:engine_turns], kv)
        finally:
            for e in extra:
                e.close()
    quality = {}
    if qa:
        from rag.embeddings import Embedder

        items = qa_items(qa)
        embedder = Embedder(config.rag.embedding_model_path)
        retrieved = sample_corpus_retrieval(
            config, engine, embedder, [i["question"] for i in items]
        )
        system = config.chat.system_prompt
        quality = qa_run(engine, items, retrieved, system, names, kv, answer_tokens)
    base_p50 = statistics.median(er["relevance"].ttfts) if er else 0.0
    base_q = quality["relevance"].grounded_score if quality else 0.0
    rows = []
    for name in names:
        r, q = er.get(name), quality.get(name)
        p50 = statistics.median(r.ttfts) if r else 0.0
        rows.append(
            (
                name,
                f"{r.hit_ratio:.3f}" if r else "-",
                f"{r.prefill_tokens:,}" if r else "-",
                f"{p50 * 1000:.0f} ms" if r else "-",
                f"{_p(r.ttfts, 0.95) * 1000:.0f} ms" if r else "-",
                _ratio(p50, base_p50) if r else "-",
                f"{q.hits}/{q.questions}" if q else "-",
                f"{q.grounded}/{q.questions} ({q.retrieved} retrieved)" if q else "-",
                f"{q.grounded_score - base_q:+.1f}" if q else "-",
            )
        )
    headers = (
        "strategy",
        "hit ratio",
        "prefill tokens",
        "TTFT p50",
        "TTFT p95",
        "p50 vs relevance",
        "[n] cites gold",
        "cites or quotes gold",
        "quality vs relevance (pts)",
    )
    lines = [
        f"embedded engine: {len(workload.turns[:engine_turns])} turns of the workload, KV budget "
        f"{kv:,} tokens, one engine per strategy, turns interleaved; quality: {qa} QA "
        f"questions over the sample corpus, top-{config.rag.top_k}",
        render(headers, rows),
    ]
    targets = []
    if er and "prefix" in er:
        ratio = statistics.median(er["prefix"].ttfts) / base_p50 if base_p50 else 1.0
        targets.append(("TTFT p50 <= 0.6 x relevance", f"{ratio:.3f}", _yes(ratio <= 0.6)))
    if quality and "prefix" in quality:
        delta = quality["prefix"].grounded_score - base_q
        targets.append(("quality >= relevance - 2 pts", f"{delta:+.1f} pts", _yes(delta >= -2)))
    return lines, targets
