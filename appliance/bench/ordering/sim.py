"""``appliance bench ordering``, part 1: every strategy through the token-level radix LRU
simulator at every capacity (prefill, hit ratio, first and later turns, the median turn), the
simulator's targets, and what a paged cache gives up.

Follow-ups against ContextPilot, and their floor: an appended follow-up's chunks new to its
conversation follow that conversation's own history, so no order gets them from the cache; the
``appended follow-ups / floor`` column is their prefill over the tokens they add (1.0: every
appended follow-up paid exactly what it added). Where a cache holds the conversations, every
appending strategy's follow-ups sit at that floor and only cache riders (chunks a conversation
already holds, so a later turn renders nothing new) lower them."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from appliance.bench.ordering.replay import ADAPTIVE_ROW, RELAY_ROW, RIDERS
from appliance.bench.table import fmt_ratio, render, yes

if TYPE_CHECKING:  # heavy imports happen only when the suite runs
    from appliance.bench.ordering.replay import Messages, Outcome, Variant
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

    def count(messages: Messages) -> int:
        return len(pieces.chat(messages))

    lines: list[tuple[str, ...]] = []
    per_cap: dict[int, dict[str, Outcome]] = {}
    for cap in capacities:
        results = per_cap[cap] = {
            v.label: replay(
                workload,
                workload.turns,
                default_ordering(cap),
                v.strategy,
                simulator_backend(RadixLRU(cap), pieces),
                v.riders,
                layout=v.layout,
                count=count,  # every row: the floor of its appended follow-ups
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
                    f"{r.prompt_tokens:,}",
                    f"{r.first_turn_prefill:,}",
                    fmt_ratio(r.first_turn_prefill, cp.first_turn_prefill) if cp else "-",
                    f"{r.prefill_tokens - r.first_turn_prefill:,}",
                    fmt_ratio(_later(r), _later(cp)) if cp else "-",
                    fmt_ratio(r.appended_prefill, r.appended_floor) if r.appended_floor else "-",
                    fmt_ratio(statistics.median(r.prefills), statistics.median(base.prefills)),
                    f"{r.riders / r.requests:.2f}" if r.requests else "-",
                    _layouts(r),
                )
            )
    headers = (
        "capacity",
        "strategy",
        "hit ratio",
        "prefill tokens",
        "vs contextpilot",
        "vs relevance",
        "prompt tokens",
        "1st-turn prefill",
        "1st-turn vs cp",
        "later-turn prefill",
        "later-turn vs cp",
        # appended follow-ups' prefill over the tokens each adds after its conversation's last
        # prompt and answer: no order can cache those (they follow a history of its own)
        "appended follow-ups / floor",
        # what TTFT p50 can gain at most on this cache: the median turn's prefill
        "p50 turn prefill vs rel.",
        "riders/turn",
        # turns appended / re-laid, and how far the shadow's prediction of the cached tokens
        # of the layouts sent was from the cache's, as a share of the prompt tokens
        "append/re-lay, pred. error",
    )
    return render(headers, lines), simulator_targets(per_cap)


def _later(r: Outcome) -> int:
    """Prefill of follow-ups (every turn but a session's first)."""
    return r.prefill_tokens - r.first_turn_prefill


def _layouts(r: Outcome) -> str:
    if not r.layouts:
        return "-"
    error = abs(r.predicted - r.cached_tokens) / r.prompt_tokens if r.prompt_tokens else 0.0
    return f"{r.layouts['append']}/{r.layouts['relay']}, {100 * error:.1f}%"


def simulator_targets(per_cap: dict[int, dict[str, Outcome]]) -> list[tuple[str, str, str]]:
    """The prefill target at every capacity (each one listed) and the best hit ratio, for
    ``prefix`` and ``prefix+rider``; then the adaptive layout's targets."""
    targets = []
    caps = sorted(per_cap)
    cp_of = {c: per_cap[c].get("contextpilot") for c in caps}
    for name, label in (("prefix", ""), (RIDERS, f" ({RIDERS})")):
        if not all(name in per_cap[c] for c in caps):
            continue
        if all(cp_of.values()):
            ratios = {c: per_cap[c][name].prefill_tokens / cp_of[c].prefill_tokens for c in caps}
            missed = [f"{c:,}" for c in caps if ratios[c] > 0.9]
            targets.append(
                (
                    f"prefill <= 0.9 x contextpilot, every capacity{label}",
                    " / ".join(f"{ratios[c]:.3f}" for c in caps),
                    "yes" if not missed else f"NO (at {', '.join(missed)})",
                )
            )
        else:
            targets.append((f"prefill <= 0.9 x contextpilot{label}", "not installed", "-"))
        best = max(per_cap[c][name].hit_ratio for c in caps)
        targets.append((f"hit ratio >= 0.74 ({name})", f"best {best:.3f}", yes(best >= 0.74)))
    if all(ADAPTIVE_ROW in per_cap[c] for c in caps):
        targets += adaptive_targets(per_cap)
    return targets


def adaptive_targets(per_cap: dict[int, dict[str, Outcome]]) -> list[tuple[str, str, str]]:
    """The per-turn layout choice: against ContextPilot (0.90x from 32k tokens, 0.95x below),
    against the better of always appending and always re-laying (1.01x), and never more
    prompt tokens than appending."""
    caps = sorted(per_cap)
    out = []
    if all("contextpilot" in per_cap[c] for c in caps):
        ratios = {
            c: per_cap[c][ADAPTIVE_ROW].prefill_tokens / per_cap[c]["contextpilot"].prefill_tokens
            for c in caps
        }
        missed = [f"{c:,}" for c in caps if ratios[c] > (0.90 if c >= 32_000 else 0.95)]
        out.append(
            (
                "adaptive prefill <= 0.90 x contextpilot (>= 32k), 0.95 x (16k)",
                " / ".join(f"{ratios[c]:.3f}" for c in caps),
                "yes" if not missed else f"NO (at {', '.join(missed)})",
            )
        )
    pure = {
        c: min(per_cap[c][RIDERS].prefill_tokens, per_cap[c][RELAY_ROW].prefill_tokens)
        for c in caps
        if RIDERS in per_cap[c] and RELAY_ROW in per_cap[c]
    }
    if pure:
        ratios = {c: per_cap[c][ADAPTIVE_ROW].prefill_tokens / pure[c] for c in pure}
        out.append(
            (
                "adaptive prefill <= 1.01 x the better of append and re-lay",
                " / ".join(f"{ratios[c]:.3f}" for c in pure),
                yes(all(r <= 1.01 for r in ratios.values())),
            )
        )
        more = [
            c
            for c in pure
            if per_cap[c][ADAPTIVE_ROW].prompt_tokens > per_cap[c][RIDERS].prompt_tokens
        ]
        out.append(
            (
                "adaptive prompt tokens <= append-only's",
                " / ".join(
                    fmt_ratio(
                        per_cap[c][ADAPTIVE_ROW].prompt_tokens, per_cap[c][RIDERS].prompt_tokens
                    )
                    for c in pure
                ),
                "yes" if not more else f"NO (at {', '.join(f'{c:,}' for c in more)})",
            )
        )
    return out


PAGES = (1, 16, 128)  # the embedded engine; a common SGLang page size; vLLM CPU's block


def granularity(
    engine: EmbeddedEngine, workload: Workload, capacities: list[int], rows: list[Variant]
) -> str:
    """Hit ratio and prefill when the engine caches whole pages only (SGLang ``--page-size``,
    vLLM's 128-token blocks) instead of every token, at each of ``capacities``: what reuse a
    coarser cache gives up on this workload, and what aligning shared segments to pages
    (``appliance.bench.ordering.aligned``: the system prompt; and each chunk of a block right
    after it) gets back for the adaptive layout. Prefill is a ratio to the row's own layout,
    unaligned, at page 1. Last, the bound padding cannot beat: an appended follow-up reuses
    the conversation's last prompt and answer at most to its last whole page (an engine keeps
    no partial page), about half a page per such follow-up."""
    picked = [v for v in rows if v.label in ("relevance", "prefix", RIDERS, ADAPTIVE_ROW)]
    lines = []
    for capacity in capacities:
        bound = capacity == max(capacities)  # where the histories are held
        for v in picked:
            aligns = ("none", "system", "block") if v.label == ADAPTIVE_ROW else ("none",)
            plain: list[Outcome] = []
            for align in aligns:
                runs = [_paged(engine, workload, capacity, v, page, align) for page in PAGES]
                plain = plain or runs
                lines.append(
                    (
                        f"{capacity:,}",
                        v.label if align == "none" else f"{v.label}, aligned: {align}",
                        *(f"{r.hit_ratio:.3f}" for r in runs),
                        *(fmt_ratio(r.prefill_tokens, plain[0].prefill_tokens) for r in runs[1:]),
                        fmt_ratio(runs[-1].prompt_tokens, plain[-1].prompt_tokens),
                        _layouts(runs[-1]),
                        _cut_bound(runs[0], PAGES[-1]) if bound and align == "none" else "-",
                    )
                )
    headers = (
        "capacity",
        "strategy",
        *(f"hit, page {p}" for p in PAGES),
        *(f"prefill, page {p} / page 1" for p in PAGES[1:]),
        f"prompt tokens vs unaligned, page {PAGES[-1]}",
        f"append/re-lay, pred. error, page {PAGES[-1]}",
        f"follow-up cut bound, page {PAGES[-1]} (histories held)",
    )
    return render(headers, lines)


def _paged(
    engine: EmbeddedEngine, workload: Workload, capacity: int, v: Variant, page: int, align: str
) -> Outcome:
    """One row replayed through a cache of ``page``-token pages, segments aligned by
    ``align``."""
    from appliance.bench.ordering.aligned import AlignedTokenizer
    from appliance.bench.ordering.radix import RadixLRU
    from appliance.bench.ordering.replay import replay, simulator_backend
    from rag.ordering import default_ordering

    pieces = AlignedTokenizer(engine.encode, page, align)

    def count(messages: Messages) -> int:
        return len(pieces.chat(messages))

    return replay(
        workload,
        workload.turns,
        default_ordering(capacity),
        v.strategy,
        simulator_backend(RadixLRU(capacity, page_tokens=page), pieces),
        v.riders,
        page_tokens=page,
        layout=v.layout,
        count=count if v.layout else None,
    )


def _cut_bound(unpaged: Outcome, page: int) -> str:
    """The prefill ratio to page 1 below which no padding of the prompt gets: half a page
    (``(page - 1) / 2`` tokens, the mean cut) more per appended follow-up."""
    appended = unpaged.layouts["append"] if unpaged.layouts else unpaged.requests
    follow_ups = appended - sum(unpaged.first_turn)
    lost = follow_ups * (page - 1) / 2
    return f">= {(unpaged.prefill_tokens + lost) / unpaged.prefill_tokens:.3f}"
