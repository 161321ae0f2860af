"""``appliance bench quality``: grounded answers on the sample handbook, one row per answer mode,
side by side in one run.

One appliance on a temporary data dir holds the sample corpus; every question of ``qa.json``
is asked, each in a fresh conversation, through the real ``ChatService.ask`` once per row:

1. ``generative, no penalties``: the model's text with repetition_penalty 1.0, no
   frequency or presence penalty and no repeat stop (the behaviour before answer modes,
   penalties and ``rag.repeats``);
2. ``generative``: the model's text with the configured penalties;
3. ``grounded``: the evidence card, then the model's text (the default);
4. ``extractive``: the card only, no generation.

The rows of one question see the same prompt (``relevance`` order, no cache riders: the cache
shadow would otherwise order a question's second asking differently from its first), and the
engine's cache is flushed before every ask, so each TTFT is that of a cold first turn and the
rows differ only in their mode and penalties. The row order rotates from question to question.
Scoring is ``appliance.bench.quality_score``'s.

``--follow-ups`` pairs the questions into two-turn conversations instead and compares each
follow-up appended against re-laid (``appliance.bench.quality_followups``).

``--corpus DIR`` ingests a folder of real documents instead of the sample corpus (timed) and
asks ``--questions`` about it in the default answer mode only (``--all-modes``: every row);
its report is ``appliance.bench.quality_corpus``'s.

``--mode NAME`` asks in that one answer mode only (with or without ``--corpus``):
``--mode extractive`` shows the card alone and generates nothing, so it runs in seconds.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from appliance.bench.quality_ask import ask_once
from appliance.bench.quality_corpus import corpus_report, default_row, ingest_stats, missing_gold
from appliance.bench.quality_followups import conversations, follow_up_report, follow_up_rows
from appliance.bench.quality_followups import run_follow_ups as run_follow_up_rows
from appliance.bench.quality_report import Row, describe, mode_report, report, rows
from appliance.bench.quality_score import Outcome, korean
from appliance.core.config import (
    SAMPLE_CORPUS,
    AppConfig,
    BootstrapConfig,
    DatabaseConfig,
    PathsConfig,
)
from appliance.core.services.grounding import ANSWER_MODES

QA_FILE = SAMPLE_CORPUS / "qa.json"
QUICK_EN, QUICK_KO, QUICK_TOKENS = 8, 4, 32


def pick_items(items: Sequence[dict], quick: bool, limit: int = 0) -> list[dict]:
    """The questions to ask: all (or the first ``limit``), or for ``--quick`` the first
    8 English and 4 Korean ones (at most ``limit`` of each language)."""
    if quick:
        en_n, ko_n = (min(QUICK_EN, limit), min(QUICK_KO, limit)) if limit else (QUICK_EN, QUICK_KO)
        en = [i for i in items if not korean(i)][:en_n]
        ko = [i for i in items if korean(i)][:ko_n]
        return en + ko
    return list(items[:limit] if limit else items)


@dataclass
class EvidenceTimer:
    """Wraps ``KnowledgeBase.evidence`` of the running appliance and records each call's time
    (the real call inside the real turn; nothing else changes)."""

    inner: Callable[..., Any]
    ms: list[float] = field(default_factory=list)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.inner(*args, **kwargs)
        finally:
            self.ms.append((time.perf_counter() - start) * 1000)


def mode_rows(defaults: Any, mode: str) -> list[Row]:
    """The one row of answer mode ``mode`` (``generative``, ``grounded`` or ``extractive``),
    with the configured repetition controls."""
    return [r for r in rows(defaults) if r.label == mode]


def run_rows(
    app: Any, items: Sequence[dict], the_rows: Sequence[Row], base: dict[str, Any]
) -> dict[str, list[Outcome]]:
    """Every question under every row, the row order rotated per question; the engine cache
    is flushed before each ask (each TTFT is a cold first turn's)."""
    principal = app.auth.principal_for(app.config.bootstrap.admin_username)
    out: dict[str, list[Outcome]] = {r.label: [] for r in the_rows}
    for n, item in enumerate(items):
        # the retriever remembers recent query vectors: embed each question once up front, so
        # that no row pays for it and another does not (latencies leave the embedding out)
        app.knowledge.hybrid.query_vector(item["question"])
        k = n % len(the_rows)
        for row in [*the_rows[k:], *the_rows[:k]]:
            app.settings.update("bench", {**base, **row.changes})
            app.engine.flush_cache()
            out[row.label].append(ask_once(app, principal, item))
    return out


def _build(config: AppConfig, tmp: Path, sample: bool = True, engine: Any = None) -> Any:
    from appliance.wiring.appliance import build_appliance, build_engine

    # the configured model, kernels from the real data dir
    engine = engine or build_engine(config)
    bench_config = config.model_copy(
        update={
            "paths": PathsConfig(data_dir=tmp),
            "database": DatabaseConfig(),
            "bootstrap": BootstrapConfig(ingest_sample_corpus=sample),
        }
    )
    return build_appliance(bench_config, engine=engine)


def _close(app: Any, keep_engine: bool) -> None:
    """Close the bench appliance; an engine the caller lent stays open (it is theirs)."""
    if not keep_engine:
        app.close()
        return
    for stop in app.on_close:
        stop()
    app.db.dispose()


def run_corpus(
    config: AppConfig,
    corpus: Path,
    question_sets: Sequence[tuple[str, Sequence[dict]]],
    max_new_tokens: int = 0,
    all_modes: bool = False,
    engine: Any = None,
    mode: str = "",
) -> str:
    """Ingest ``corpus`` into a scratch appliance (timed) once, ask every item of each named
    question set in the default answer mode (``all_modes``: every row; ``mode``: that answer
    mode only), return the printed report (a table per set and language). ``engine``: a
    loaded engine to use (tests share one)."""
    tokens = max_new_tokens or config.engine.max_new_tokens
    started = time.perf_counter()
    every = [item for _, items in question_sets for item in items]
    with tempfile.TemporaryDirectory() as tmp:
        app = _build(config, Path(tmp), sample=False, engine=engine)
        try:
            began = time.perf_counter()
            ingested = app.ingest.ingest_folder(corpus)
            stats = ingest_stats(ingested, time.perf_counter() - began)
            stored = {r.name for r in ingested if r.status != "error"}
            base = {"max_new_tokens": tokens, "ordering": "relevance", "riders": 0}
            chosen = app.settings.defaults
            if mode:
                the_rows = mode_rows(chosen, mode)
            else:
                the_rows = rows(chosen) if all_modes else [default_row(chosen)]
            results = [
                (name, run_rows(app, items, the_rows, base)) for name, items in question_sets
            ]
            model = Path(str(getattr(app.engine, "model_dir", config.engine.model_path))).name
        finally:
            _close(app, keep_engine=engine is not None)
    head = describe(config, model, tokens, chosen, the_rows, every)
    body = corpus_report(corpus, stats, results, missing_gold(every, stored))
    return "\n".join([head, *body, f"total {time.perf_counter() - started:.0f} s"])


def run(
    config: AppConfig,
    quick: bool = False,
    limit: int = 0,
    max_new_tokens: int = 0,
    questions: Path = QA_FILE,
    follow_ups: bool = False,
    mode: str = "",
) -> str:
    """Build the appliance, ask every question in every row, return the printed report.
    ``questions``: a question file in ``qa.json``'s shape, about the sample corpus;
    ``follow_ups``: pair them into conversations and compare the layouts of the follow-ups
    (``appliance.bench.quality_followups``) instead of the answer modes; ``mode``: ask in
    that answer mode only."""
    items = pick_items(json.loads(questions.read_text(encoding="utf-8")), quick, limit)
    tokens = max_new_tokens or (QUICK_TOKENS if quick else config.engine.max_new_tokens)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        app = _build(config, Path(tmp))
        try:
            timer = EvidenceTimer(app.knowledge.evidence)
            app.knowledge.evidence = timer  # type: ignore[method-assign]
            base = {"max_new_tokens": tokens, "ordering": "relevance", "riders": 0}
            chosen = app.settings.defaults
            pairs: list[tuple[dict, dict]] = []
            if follow_ups:
                pairs = conversations(items)
                the_rows = follow_up_rows(chosen)
                results = run_follow_up_rows(app, pairs, the_rows, base)
            else:
                the_rows = mode_rows(chosen, mode) if mode else rows(chosen)
                results = run_rows(app, items, the_rows, base)
            model = Path(str(getattr(app.engine, "model_dir", config.engine.model_path))).name
        finally:
            app.close()
    paired = len(pairs)
    head = describe(config, model, tokens, chosen, the_rows, items, paired)
    took = f"total {time.perf_counter() - started:.0f} s"
    if follow_ups:
        body = follow_up_report(results, paired)
    else:
        body = mode_report(results, timer.ms) if mode else report(results, timer.ms)
    return "\n".join([head, *body, took])


def main(argv: list[str], config: AppConfig) -> int:
    """``appliance bench quality [--quick] [--limit N] [--max-new-tokens N] [--follow-ups]
    [--corpus DIR [--all-modes]] [--questions FILE] [--mode NAME]``."""
    parser = argparse.ArgumentParser(prog="appliance bench quality")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_EN} EN + {QUICK_KO} KO questions, {QUICK_TOKENS}-token answers",
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=0,
        help="ask only the first N questions (with --quick: N of each language)",
    )
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=0,
        help="answer length (default: engine.max_new_tokens)",
    )
    parser.add_argument(
        "--questions",
        type=Path,
        action="append",
        help="a question file in qa.json's shape, about the sample corpus "
        "(default: qa.json; qa_heldout.json holds questions the ranking was not tuned on); "
        "with --corpus, about that corpus, and it may be given more than once (one ingest, "
        "a table per file)",
    )
    parser.add_argument(
        "--follow-ups",
        action="store_true",
        help="pair the questions into two-turn conversations and compare the follow-ups "
        "appended against re-laid (rag.layout), in the generative and grounded modes",
    )
    parser.add_argument(
        "--corpus",
        type=Path,
        default=None,
        help="a folder of documents to ingest into the scratch data dir instead of the sample "
        "corpus; --questions then names a question file about it (gold_file: the document's "
        "path below DIR); asks in the default answer mode",
    )
    parser.add_argument(
        "--all-modes",
        action="store_true",
        help="with --corpus: ask in every answer mode row, not only the default one",
    )
    parser.add_argument(
        "--mode",
        choices=ANSWER_MODES,
        default="",
        help="ask in this one answer mode only (extractive: the evidence card alone, no "
        "generation; fast)",
    )
    args = parser.parse_args(argv)
    if args.mode and (args.all_modes or args.follow_ups):
        parser.error("--mode does not go with --all-modes or --follow-ups")
    if args.limit < 0 or args.max_new_tokens < 0:
        parser.error("--limit and --max-new-tokens must not be negative")
    files: list[Path] = args.questions or [QA_FILE]
    for file in files:
        if not file.is_file():
            parser.error(f"--questions: no file {file}")
    if args.corpus is not None:
        if not args.corpus.is_dir():
            parser.error(f"--corpus: no folder {args.corpus}")
        if not args.questions:
            parser.error("--corpus needs --questions: a question file about that corpus")
        if args.follow_ups:
            parser.error("--corpus and --follow-ups do not go together")
        sets = [
            (f.name, pick_items(json.loads(f.read_text(encoding="utf-8")), args.quick, args.limit))
            for f in files
        ]
        tokens = args.max_new_tokens or (QUICK_TOKENS if args.quick else 0)
        print(run_corpus(config, args.corpus, sets, tokens, args.all_modes, mode=args.mode))
        return 0
    if len(files) > 1:
        parser.error("--questions: give one file (more than one only with --corpus)")
    print(
        run(
            config,
            quick=args.quick,
            limit=args.limit,
            max_new_tokens=args.max_new_tokens,
            questions=files[0],
            follow_ups=args.follow_ups,
            mode=args.mode,
        )
    )
    return 0
