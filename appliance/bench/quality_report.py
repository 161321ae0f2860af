"""The report of ``appliance bench quality``: its rows (the modes compared), the configuration
line, the English and Korean tables and the targets (pure: it formats outcomes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from appliance.bench.quality_score import (
    SUMMARY_HEADERS,
    Outcome,
    korean,
    percentile,
    summary_row,
)
from appliance.bench.table import render, yes
from appliance.core.config import AppConfig

NO_PENALTIES = {"repetition_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}
# the repetition controls a row sets: the penalties, and the repeat stop (``rag.repeats``)
CONTROLS = (*NO_PENALTIES, "stop_repeats")
SHOWN_FIRST_TARGET, EVIDENCE_P95_MS, TTFT_RATIO = 0.85, 30.0, 1.05


@dataclass(frozen=True)
class Row:
    """One mode of the comparison: its label and the settings it asks under."""

    label: str
    changes: dict[str, Any]


def rows(defaults: Any) -> list[Row]:
    """The four rows; ``defaults`` are the appliance's ChatSettings (their penalties)."""
    penalties = {k: getattr(defaults, k) for k in CONTROLS}
    today = {**NO_PENALTIES, "stop_repeats": False}
    return [
        Row("generative, no penalties", {"answer_mode": "generative", **today}),
        Row("generative", {"answer_mode": "generative", **penalties}),
        Row("grounded", {"answer_mode": "grounded", **penalties}),
        Row("extractive", {"answer_mode": "extractive", **penalties}),
    ]


def _shown(value: Any) -> str:
    return ("on" if value else "off") if isinstance(value, bool) else f"{value:g}"


def describe(
    config: AppConfig,
    model: str,
    tokens: int,
    chosen: Any,
    the_rows: Sequence[Row],
    items: list,
    follow_ups: int = 0,
) -> str:
    """The configuration the run used, printed above the tables (``follow_ups``: the number
    of two-turn conversations the questions were paired into, if they were)."""
    ko = sum(korean(i) for i in items)
    asked = (
        f"paired into {follow_ups} two-turn conversations (the follow-up asked once per row)"
        if follow_ups
        else "each in a fresh conversation"
    )
    lines = [
        f"model {model} ({config.engine.backend}), max_new_tokens {tokens}, temperature "
        f"{chosen.temperature}, top_k {chosen.top_k} chunks, ordering relevance, no riders, "
        f"evidence sentences {chosen.evidence_sentences}; {len(items)} questions "
        f"({len(items) - ko} EN, {ko} KO), {asked}",
        "engine cache flushed before each ask; each question embedded once up front "
        "(latencies leave the query embedding out)",
    ]
    for r in the_rows:
        pens = ", ".join(f"{k} {_shown(r.changes[k])}" for k in CONTROLS)
        gen = "" if r.changes["answer_mode"] == "extractive" else f": {pens}"
        layout = f", layout {r.changes['layout']}" if "layout" in r.changes else ""
        lines.append(f"  {r.label}: answer_mode {r.changes['answer_mode']}{layout}{gen}")
    return "\n".join(lines)


def language_tables(results: dict[str, list[Outcome]]) -> list[str]:
    """The EN and KO tables: one row per mode."""
    out = []
    for lang, is_ko in (("English", False), ("Korean", True)):
        table = [
            summary_row(label, [o for o in outs if o.korean == is_ko])
            for label, outs in results.items()
        ]
        out += [f"{lang} questions", render(SUMMARY_HEADERS, table)]
    return out


def report(results: dict[str, list[Outcome]], evidence_ms: Sequence[float]) -> list[str]:
    """The EN and KO tables, the targets, and each loop, unflagged invention or error."""
    out = language_tables(results)
    out.append(render(("target", "measured", "met"), targets(results, evidence_ms)))
    return out + notable(results)


def mode_report(results: dict[str, list[Outcome]], evidence_ms: Sequence[float]) -> list[str]:
    """``report`` for a run of one answer mode: the EN and KO tables and the evidence p95,
    without the targets (they compare the rows of every mode)."""
    p95 = percentile(evidence_ms, 95)
    out = [
        *language_tables(results),
        f"evidence extraction p95 {p95:.1f} ms ({len(evidence_ms)} turns)",
    ]
    return out + notable(results)


def notable(results: dict[str, list[Outcome]]) -> list[str]:
    """A line per loop, unflagged invention and error of a run, with its row."""
    out = []
    for label, outs in results.items():
        for o in outs:
            if o.looped:
                out.append(f"loops ({label}): {o.question}")
            for inv in o.inventions:
                out.append(f"unflagged ({label}): {inv.facts} in {inv.sentence!r}")
            if o.error:
                out.append(f"error ({label}): {o.question}: {o.error}")
    return out


def targets(results: dict[str, list[Outcome]], evidence_ms: Sequence[float]) -> list[tuple]:
    """(target, measured, met) rows."""
    grounded = [o for o in results["grounded"] if not o.error]
    out = []
    for lang, is_ko in (("EN", False), ("KO", True)):
        mine = [o for o in grounded if o.korean == is_ko]
        got = sum(o.shown_first for o in mine) / len(mine) if mine else 0.0
        out.append(
            (
                f"fact shown first, grounded, {lang} >= 85%",
                f"{100 * got:.0f}%",
                yes(bool(mine) and got >= SHOWN_FIRST_TARGET),
            )
        )
    looped = sum(o.looped for r in ("generative", "grounded") for o in results[r])
    out.append(("0 loops (generative and grounded)", str(looped), yes(looped == 0)))
    invented = sum(len(o.inventions) for outs in results.values() for o in outs)
    out.append(("0 unflagged inventions (every row)", str(invented), yes(invented == 0)))
    p95 = percentile(evidence_ms, 95)
    out.append(
        (
            f"evidence extraction p95 <= {EVIDENCE_P95_MS:g} ms",
            f"{p95:.1f} ms ({len(evidence_ms)} turns)",
            yes(bool(evidence_ms) and p95 <= EVIDENCE_P95_MS),
        )
    )
    # paired: each question's grounded TTFT over its own generative TTFT (the rows of one
    # question see the same prompt), then the median. The pooled p50s beside it mix English
    # (~0.6 s) and Korean (~1.0 s) prompts, so their median falls between the two clusters
    # and moves by tens of ms from run to run
    pairs = [
        g.ttft_s / n.ttft_s
        for n, g in zip(results["generative"], results["grounded"], strict=True)
        if not (n.error or g.error) and n.ttft_s > 0
    ]
    ratio = percentile(pairs, 50) if pairs else float("inf")
    ttft = {r: [o.ttft_s for o in results[r] if not o.error] for r in ("generative", "grounded")}
    gen, gro = (percentile(ttft[r], 50) for r in ("generative", "grounded"))
    out.append(
        (
            "grounded TTFT <= 1.05x generative (median of per-question ratios)",
            f"{ratio:.3f}x (pooled p50 {gro:.3f} s / {gen:.3f} s)",
            yes(ratio <= TTFT_RATIO),
        )
    )
    errors = sum(bool(o.error) for outs in results.values() for o in outs)
    out.append(("no failed turns", str(errors), yes(errors == 0)))
    return out
