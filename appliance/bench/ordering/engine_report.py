"""``appliance bench ordering``, parts 2 and 3: a slice of the workload on the embedded engine
(TTFT p50/p95, first turns and follow-ups, one engine per strategy) and the sample corpus's QA
set (citations that hit the gold chunk), with their targets."""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import TYPE_CHECKING

from appliance.bench.ordering.replay import ADAPTIVE_ROW, RIDERS
from appliance.bench.table import fmt_ratio, render, yes
from appliance.core.config import AppConfig

if TYPE_CHECKING:  # heavy imports happen only when the suite runs
    from appliance.bench.ordering.replay import Variant
    from appliance.bench.ordering.workload import Workload
    from engine.embedded.engine import EmbeddedEngine


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def _ms_p50_p95(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values) * 1000:.0f} / {_p(values, 0.95) * 1000:.0f} ms"


ENGINE_HEADERS = (
    "strategy",
    "hit ratio",
    "prefill tokens",
    "TTFT p50",
    "TTFT p95",
    "p50 vs relevance",
    "p50/p95 first turns",
    "p50/p95 follow-ups",
    "[n] cites gold",
    "cites or quotes gold",
    "quality vs relevance (pts)",
    "riders slice/QA",
)


def on_engine(
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
        # the QA set is first turns, which every layout appends: a layout row shares the
        # quality of its strategy and riders (marked *), measured once
        plain = [v for v in names if v.layout is None]
        quality = _qa_quality(config, engine, plain, qa, answer_tokens, riders)
        for v in names:
            twin = next(
                (p.label for p in plain if (p.strategy, p.riders) == (v.strategy, v.riders)), None
            )
            if v.layout is not None and twin in quality:
                quality[v.label] = replace(quality[twin], shared=True)
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
    from appliance.wiring.appliance import build_embedder

    items = qa_items(qa)
    embedder = build_embedder(config)  # as the appliance runs it, beside the engine
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
        _ms_p50_p95(r.ttfts_of(True)) if r else "-",
        _ms_p50_p95(r.ttfts_of(False)) if r else "-",
        f"{q.hits}/{q.questions}{'*' if q.shared else ''}" if q else "-",
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
    adaptive = er.get(ADAPTIVE_ROW) if er else None
    if adaptive is not None and "relevance" in er:
        p50 = statistics.median(adaptive.ttfts)
        rivals = [statistics.median(er[n].ttfts) for n in ("relevance", "contextpilot") if n in er]
        p95, base_p95 = _p(adaptive.ttfts, 0.95), _p(er["relevance"].ttfts, 0.95)
        targets.append(
            (
                "adaptive TTFT p50 <= relevance's and contextpilot's",
                f"{p50 * 1000:.0f} ms vs {' / '.join(f'{r * 1000:.0f}' for r in rivals)} ms",
                yes(p50 <= min(rivals)),
            )
        )
        ratio = p95 / base_p95 if base_p95 else 1.0
        targets.append(
            ("adaptive TTFT p95 <= 0.8 x relevance's", f"{ratio:.3f}", yes(ratio <= 0.8))
        )
    return targets
