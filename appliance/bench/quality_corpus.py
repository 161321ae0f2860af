"""``appliance bench quality --corpus DIR``: the quality bench on a folder of real documents.

The folder is ingested into the bench's scratch data dir (instead of the sample handbook)
through the real ingest service, timed; then every question of ``--questions`` (``qa.json``'s
shape, ``gold_file`` named as the folder's documents are stored: their path below the folder)
is asked through the real chat service in the appliance's default answer mode (``--all-modes``:
the four rows of ``appliance.bench.quality_report``). One table per language says where the
fact was (shown first, in the card, in the generated text, in the retrieved chunks) and
whether the first citation was the gold file; the ingest table says how the corpus was cut
(chunks per page) and how fast it went in (chunks per second). Pure here: the I/O is the
caller's (``appliance.bench.quality_bench``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from appliance.bench.quality_report import CONTROLS, Row
from appliance.bench.quality_score import Outcome, share, timing_cells
from appliance.bench.table import render

CORPUS_HEADERS = (
    "mode",
    "questions",
    "fact shown first",
    "fact in card",
    "fact in generated text",
    "generated claims supported",
    "fact in retrieved chunks",
    "1st citation gold",
    "gold cited",
    "latency p50",
    "latency p95",
    "TTFT p50",
    "errors",
)
INGEST_HEADERS = (
    "pages",
    "indexed",
    "failed",
    "chunks",
    "chunks per page",
    "ingest s",
    "ingest chunks/s",
)


@dataclass(frozen=True)
class IngestStats:
    """How a corpus went in: files offered, documents indexed, files refused, chunks, time."""

    pages: int
    indexed: int
    failed: tuple[str, ...]  # "name: why" per refused file
    chunks: int
    seconds: float

    @property
    def chunks_per_page(self) -> float:
        return self.chunks / self.indexed if self.indexed else 0.0

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.seconds if self.seconds > 0 else 0.0


def ingest_stats(results: Sequence[Any], seconds: float) -> IngestStats:
    """The stats of one ``IngestService.ingest_folder`` call's results (duplicates count as
    pages that added nothing)."""
    failed = tuple(f"{r.name}: {r.error}" for r in results if r.status == "error")
    indexed = sum(r.status in ("indexed", "updated") for r in results)
    return IngestStats(len(results), indexed, failed, sum(r.chunks for r in results), seconds)


def default_row(defaults: Any) -> Row:
    """The appliance's default answer mode with its configured repetition controls."""
    controls = {k: getattr(defaults, k) for k in CONTROLS}
    return Row(
        f"{defaults.answer_mode} (default)", {"answer_mode": defaults.answer_mode, **controls}
    )


def corpus_row(label: str, outcomes: Sequence[Outcome]) -> tuple[str, ...]:
    """One table row: one mode, one language."""
    ok = [o for o in outcomes if not o.error]
    n = len(ok)
    return (
        label,
        str(len(outcomes)),
        share(sum(o.shown_first for o in ok), n),
        share(sum(o.in_card for o in ok), n),
        # the generated-text columns count answers the engine wrote ("-": none, extractive)
        share(sum(o.in_text for o in ok), sum(o.generated for o in ok)),
        share(sum(o.claims_supported for o in ok), sum(o.claims_total for o in ok)),
        share(sum(o.in_chunks for o in ok), n),
        share(sum(o.gold_cited_first for o in ok), n),
        share(sum(o.gold_cited for o in ok), n),
        *timing_cells(outcomes),
    )


def ingest_row(stats: IngestStats) -> tuple[str, ...]:
    return (
        str(stats.pages),
        str(stats.indexed),
        str(len(stats.failed)),
        str(stats.chunks),
        f"{stats.chunks_per_page:.1f}",
        f"{stats.seconds:.1f}",
        f"{stats.chunks_per_s:.1f}",
    )


def missing_gold(items: Sequence[dict], stored: set[str]) -> list[str]:
    """The gold files the questions name that the ingested corpus does not hold."""
    return sorted({i["gold_file"] for i in items} - stored)


def language_tables(name: str, results: dict[str, list[Outcome]]) -> list[str]:
    """A table per language asked in one question set (``name``: its file)."""
    out = []
    for lang, is_ko in (("English", False), ("Korean", True)):
        if not any(o.korean == is_ko for outs in results.values() for o in outs):
            continue
        table = [
            corpus_row(label, [o for o in outs if o.korean == is_ko])
            for label, outs in results.items()
        ]
        out += [f"{lang} questions ({name})", render(CORPUS_HEADERS, table)]
    return out


def corpus_report(
    corpus: Path,
    stats: IngestStats,
    results: Sequence[tuple[str, dict[str, list[Outcome]]]],
    missing: Sequence[str] = (),
) -> list[str]:
    """The ingest table, the tables of each question set, then each miss, failure and gap."""
    out = [f"corpus {corpus}", render(INGEST_HEADERS, [ingest_row(stats)])]
    for name, by_row in results:
        out += language_tables(name, by_row)
    out += [f"refused at ingest: {why}" for why in stats.failed]
    out += [f"gold file not in the corpus: {name}" for name in missing]
    for name, by_row in results:
        for label, outs in by_row.items():
            for o in outs:
                if o.error:
                    out.append(f"error ({name}, {label}): {o.question}: {o.error}")
                elif not o.shown_first:
                    where = "in chunks, not shown" if o.in_chunks else "not retrieved"
                    out.append(f"miss ({name}, {label}, {where}): {o.question}")
    return out
