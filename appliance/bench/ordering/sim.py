"""``appliance bench ordering``, part 1: every strategy through the token-level radix LRU
simulator at every capacity (prefill, hit ratio, first and later turns, the median turn), the
simulator's targets, and what a paged cache gives up."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from appliance.bench.ordering.replay import RIDERS
from appliance.bench.table import fmt_ratio, render, yes

if TYPE_CHECKING:  # heavy imports happen only when the suite runs
    from appliance.bench.ordering.replay import Variant
    from appliance.bench.ordering.workload import Workload
    from engine.embedded.engine import EmbeddedEngine


def simulate(
    engine: EmbeddedEngine, workload: Workload, capacities: list[int], rows: list[Variant]
) -> tuple[str, list[tuple[str, str, str]]]:
    """Every strategy through the radix simulator at every capacity: the table and targets."""
    from appliance.bench.ordering.radix import RadixLRU
    from appliance.bench.ordering.replay import PieceTokenizer, replay, simulator_backend
    from rag.ordering import default_ordering

    pieces = PieceTokenizer(engine.encode)
    lines: list[tuple[str, ...]] = []
    # per variant of ours: (capacity, prefill / contextpilot's, hit ratio) at every capacity
    ours: dict[str, list[tuple[int, float, float]]] = {}
    for cap in capacities:
        results = {
            v.label: replay(
                workload,
                workload.turns,
                default_ordering(cap),
                v.strategy,
                simulator_backend(RadixLRU(cap), pieces),
                v.riders,
            )
            for v in rows
        }
        base, cp = results["relevance"], results.get("contextpilot")
        for name, r in results.items():
            lines.append(
                (
                    f"{cap:,}",
                    name,
                    f"{r.hit_ratio:.3f}",
                    f"{r.prefill_tokens:,}",
                    fmt_ratio(r.prefill_tokens, cp.prefill_tokens) if cp else "-",
                    fmt_ratio(r.prefill_tokens, base.prefill_tokens),
                    f"{r.first_turn_prefill:,}",
                    fmt_ratio(r.first_turn_prefill, cp.first_turn_prefill) if cp else "-",
                    f"{r.prefill_tokens - r.first_turn_prefill:,}",
                    fmt_ratio(statistics.median(r.prefills), statistics.median(base.prefills)),
                    f"{r.riders / r.requests:.2f}" if r.requests else "-",
                )
            )
        for name in ("prefix", RIDERS):
            if name in results:
                r = results[name]
                vs_cp = r.prefill_tokens / cp.prefill_tokens if cp else 0.0
                ours.setdefault(name, []).append((cap, vs_cp, r.hit_ratio))
    headers = (
        "capacity",
        "strategy",
        "hit ratio",
        "prefill tokens",
        "vs contextpilot",
        "vs relevance",
        "1st-turn prefill",
        "1st-turn vs cp",
        "later-turn prefill",
        # what TTFT p50 can gain at most on this cache: the median turn's prefill
        "p50 turn prefill vs rel.",
        "riders/turn",
    )
    return render(headers, lines), simulator_targets(ours)


def simulator_targets(
    ours: dict[str, list[tuple[int, float, float]]],
) -> list[tuple[str, str, str]]:
    """The prefill target at every capacity (each one listed) and the best hit ratio."""
    targets = []
    for name, label in (("prefix", ""), (RIDERS, f" ({RIDERS})")):
        if name not in ours:
            continue
        per_cap = ours[name]
        if all(vs_cp for _c, vs_cp, _h in per_cap):
            missed = [f"{c:,}" for c, vs_cp, _h in per_cap if vs_cp > 0.9]
            targets.append(
                (
                    f"prefill <= 0.9 x contextpilot, every capacity{label}",
                    " / ".join(f"{vs_cp:.3f}" for _c, vs_cp, _h in per_cap),
                    "yes" if not missed else f"NO (at {', '.join(missed)})",
                )
            )
        else:
            targets.append((f"prefill <= 0.9 x contextpilot{label}", "not installed", "-"))
        best = max(h for _c, _v, h in per_cap)
        targets.append((f"hit ratio >= 0.74 ({name})", f"best {best:.3f}", yes(best >= 0.74)))
    return targets


PAGES = (1, 16, 128)  # the embedded engine; a common SGLang page size; vLLM CPU's block


def granularity(
    engine: EmbeddedEngine, workload: Workload, capacity: int, rows: list[Variant]
) -> str:
    """Hit ratio when the engine caches whole pages only (SGLang ``--page-size``, vLLM's
    128-token blocks) instead of every token: what reuse a coarser cache gives up on this
    workload, at the largest capacity."""
    from appliance.bench.ordering.radix import RadixLRU
    from appliance.bench.ordering.replay import PieceTokenizer, replay, simulator_backend
    from rag.ordering import default_ordering

    pieces = PieceTokenizer(engine.encode)
    picked = [v for v in rows if v.label in ("relevance", "prefix", RIDERS)]
    lines = []
    for v in picked:
        hits = []
        for page in PAGES:
            r = replay(
                workload,
                workload.turns,
                default_ordering(capacity),
                v.strategy,
                simulator_backend(RadixLRU(capacity, page_tokens=page), pieces),
                v.riders,
                page_tokens=page,
            )
            hits.append(r)
        lines.append(
            (
                v.label,
                *(f"{r.hit_ratio:.3f}" for r in hits),
                *(fmt_ratio(r.prefill_tokens, hits[0].prefill_tokens) for r in hits[1:]),
            )
        )
    headers = (
        f"capacity {capacity:,}",
        *(f"hit, page {p}" for p in PAGES),
        *(f"prefill, page {p} / page 1" for p in PAGES[1:]),
    )
    return render(headers, lines)
