"""``appliance bench followups``: what a follow-up retrieves, side by side in one run.

One appliance on a temporary data dir holds the sample handbook (or ``--corpus DIR``). For each
pair of a file like ``followup_sets/handbook.json`` (a first question, then a follow-up that
leans on it or changes topic, with the follow-up's gold file), the follow-up is retrieved
four ways through the real ``KnowledgeBase.retrieve``:

- ``asked first``: the follow-up's self-contained wording, in a new conversation (the bar);
- ``alone``: the follow-up's own words only (before ``rag.followup``);
- ``always carried``: the follow-up with the first question's words, whatever it says;
- ``rag.followup``: the appliance's rule (carry only when the follow-up leans on the first).

A row counts the follow-ups whose first retrieved chunk is from the gold file, by language and
kind (``same`` topic or ``topic`` change).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from appliance.bench.table import render
from appliance.core.config import (
    SAMPLE_CORPUS,
    AppConfig,
    BootstrapConfig,
    DatabaseConfig,
    PathsConfig,
)
from rag.bm25_tokenizer import HANGUL, Tokenizer
from rag.followup import retrieval_query

PAIRS = Path(__file__).resolve().parent / "followup_sets" / "handbook.json"
WAYS = ("asked first", "alone", "always carried", "rag.followup")


def _queries(pair: dict, tokenize: Callable[[str], list[str]]) -> dict[str, str]:
    first, follow = pair["first"], pair["follow_up"]
    return {
        "asked first": pair["standalone"],
        "alone": follow,
        "always carried": f"{follow} {follow} {first}",
        "rag.followup": retrieval_query(follow, [first], tokenize).text,
    }


def score(pairs: Sequence[dict], first_file: Callable[[str], str]) -> dict[tuple, list[bool]]:
    """(language, kind, way) → whether each follow-up's first chunk is from its gold file."""
    tokenize = Tokenizer().tokenize
    hits: dict[tuple, list[bool]] = {}
    for pair in pairs:
        lang = "ko" if HANGUL.search(pair["follow_up"]) else "en"
        for way, query in _queries(pair, tokenize).items():
            hit = first_file(query) == pair["gold_file"]
            hits.setdefault((lang, pair["kind"], way), []).append(hit)
    return hits


def report(hits: dict[tuple, list[bool]]) -> str:
    groups = sorted({(lang, kind) for lang, kind, _ in hits})
    rows = []
    for lang, kind in groups:
        n = len(hits[(lang, kind, WAYS[0])])
        cells = [f"{sum(hits[(lang, kind, w)])}/{n}" for w in WAYS]
        rows.append([lang, "same topic" if kind == "same" else "topic change", str(n), *cells])
    totals = [sum(sum(v) for (_, _, w), v in hits.items() if w == way) for way in WAYS]
    n_all = sum(len(v) for (_, _, w), v in hits.items() if w == WAYS[0])
    rows.append(["all", "", str(n_all), *(f"{t}/{n_all}" for t in totals)])
    head = ["lang", "follow-up", "n", *WAYS]
    return "first retrieved chunk from the gold file\n" + render(head, rows)


def _build(config: AppConfig, tmp: Path, corpus: Path | None) -> Any:  # noqa: ANN401
    from appliance.wiring.appliance import build_appliance, build_engine

    bench = config.model_copy(
        update={
            "paths": PathsConfig(data_dir=tmp),
            "database": DatabaseConfig(),
            "bootstrap": BootstrapConfig(ingest_sample_corpus=corpus is None),
        }
    )
    app = build_appliance(bench, engine=build_engine(config))
    if corpus is not None:
        app.ingest.ingest_folder(corpus)
    return app


def run(config: AppConfig, pairs_file: Path, corpus: Path | None) -> str:
    pairs = json.loads(pairs_file.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="bench-followups-") as tmp:
        app = _build(config, Path(tmp), corpus)
        try:
            top_k = app.settings.current().top_k

            def first_file(query: str) -> str:
                chunks, _ms = app.knowledge.retrieve(query, top_k)
                return chunks[0].source if chunks else ""

            hits = score(pairs, first_file)
        finally:
            app.close()
    return f"{len(pairs)} pairs from {pairs_file.name}\n{report(hits)}"


def main(argv: list[str], config: AppConfig) -> int:
    """``appliance bench followups [--pairs FILE] [--corpus DIR]``."""
    parser = argparse.ArgumentParser(prog="appliance bench followups")
    parser.add_argument("--pairs", type=Path, default=PAIRS, help="follow-up pairs (JSON)")
    parser.add_argument(
        "--corpus", type=Path, default=None, help=f"documents (default: {SAMPLE_CORPUS.name})"
    )
    args = parser.parse_args(argv)
    if not args.pairs.is_file():
        parser.error(f"--pairs: no file {args.pairs}")
    if args.corpus is not None and not args.corpus.is_dir():
        parser.error(f"--corpus: no folder {args.corpus}")
    print(run(config, args.pairs, args.corpus))
    return 0
