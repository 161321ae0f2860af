"""``appliance bench quality --corpus DIR``: the pure columns (where the fact was, chunks per
page, ingest chunks/s), the command's argument checks, and one run on a tiny HTML corpus in
tmp_path through the real ingest and chat services."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from appliance.bench.quality_bench import main, run_corpus
from appliance.bench.quality_corpus import (
    CORPUS_HEADERS,
    IngestStats,
    corpus_report,
    corpus_row,
    default_row,
    ingest_stats,
    missing_gold,
)
from appliance.bench.quality_score import Outcome, score
from appliance.core.services.ingest import IngestResult
from appliance.core.services.settings import ChatSettings

ITEM = {"question": "Which port?", "gold_file": "docs/net.html", "answers": ["5432"]}
CHUNK = "The server listens on TCP port 5432 by default."


def test_score_says_where_the_fact_was() -> None:
    in_card = score(
        ITEM, "port 5432", "It is 80.", "other.html", None, [CHUNK], (1.0, 0.5), False,
        chunks=[CHUNK], cited=["other.html", "docs/net.html"],
    )  # fmt: skip
    assert in_card.in_card and not in_card.in_text and in_card.in_chunks
    assert in_card.gold_cited and not in_card.gold_cited_first
    in_text = score(
        ITEM, "", "Port 5432.", "docs/net.html", None, [], (1.0, 0.5), False,
        chunks=["nothing here"], cited=["docs/net.html"],
    )  # fmt: skip
    assert in_text.in_text and in_text.shown_first and not in_text.in_card
    assert not in_text.in_chunks and in_text.gold_cited_first


def _outcome(korean: bool, card: bool, chunks: bool, latency: float, error: str = "") -> Outcome:
    return Outcome(
        korean, card, card, card, False, (), latency, latency / 4, error=error, question="q",
        in_card=card, in_text=False, in_chunks=chunks, gold_cited=chunks,
    )  # fmt: skip


def test_a_corpus_row_counts_each_place_of_the_fact() -> None:
    outs = [
        _outcome(False, True, True, 1.0),
        _outcome(False, False, True, 3.0),
        _outcome(False, False, False, 0.0, error="busy"),
    ]
    row = dict(zip(CORPUS_HEADERS, corpus_row("grounded (default)", outs), strict=True))
    assert row["questions"] == "3" and row["errors"] == "1"
    assert row["fact shown first"] == row["fact in card"] == "1/2 (50%)"
    assert row["fact in generated text"] == "0/2 (0%)"
    assert row["fact in retrieved chunks"] == row["gold cited"] == "2/2 (100%)"
    assert row["latency p50"] == "2.00 s" and row["latency p95"] == "2.90 s"


def test_the_generated_text_columns_count_only_what_the_engine_wrote() -> None:
    from rag.verify import AnswerCheck, SentenceVerdict

    verdicts = (
        SentenceVerdict(0, 10, True, (), (), "ok"),
        SentenceVerdict(11, 20, False, (), (), "not found"),
    )
    check = AnswerCheck(verdicts, ())
    args = (ITEM, "port 5432", "Port 5432.", "docs/net.html", check, [CHUNK], (1.0, 0.5), False)
    written, quoted = score(*args), score(*args, generated=False)
    assert written.in_text and (written.claims_supported, written.claims_total) == (1, 2)
    # an extractive answer is the card: it is no generated text, and its claims are not the model's
    assert not quoted.in_text and (quoted.claims_supported, quoted.claims_total) == (0, 0)
    row = dict(zip(CORPUS_HEADERS, corpus_row("extractive", [quoted]), strict=True))
    assert row["fact in generated text"] == row["generated claims supported"] == "-"
    row = dict(zip(CORPUS_HEADERS, corpus_row("grounded", [written]), strict=True))
    assert row["generated claims supported"] == "1/2 (50%)"


def test_ingest_stats_give_chunks_per_page_and_per_second() -> None:
    results = [
        IngestResult("a.html", "indexed", 1, 6),
        IngestResult("b/c.html", "indexed", 2, 4),
        IngestResult("d.html", "error", error="no text found in the file"),
    ]
    stats = ingest_stats(results, 2.0)
    assert (stats.pages, stats.indexed, stats.chunks) == (3, 2, 10)
    assert stats.chunks_per_page == 5.0 and stats.chunks_per_s == 5.0
    assert stats.failed == ("d.html: no text found in the file",)
    assert missing_gold([ITEM, {**ITEM, "gold_file": "a.html"}], {"a.html"}) == ["docs/net.html"]
    assert IngestStats(0, 0, (), 0, 0.0).chunks_per_s == 0.0


def test_the_report_has_the_ingest_table_and_one_table_per_language_asked() -> None:
    stats = IngestStats(3, 3, (), 12, 4.0)
    results = [("dev.json", {"x": [_outcome(True, False, True, 1.0)]})]
    out = "\n".join(corpus_report(Path("/c"), stats, results))
    assert "chunks per page" in out and "| 4.0 " in out and "| 3.0 " in out
    assert "Korean questions (dev.json)" in out and "English questions" not in out
    assert "miss (dev.json, x, in chunks, not shown): q" in out


def test_the_default_row_is_the_default_answer_mode() -> None:
    row = default_row(ChatSettings("system", 4, "prefix", 0.0, 256, answer_mode="grounded"))
    assert row.label == "grounded (default)" and row.changes["answer_mode"] == "grounded"
    assert "repetition_penalty" in row.changes


def test_corpus_arguments_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    questions = tmp_path / "q.json"
    questions.write_text("[]", encoding="utf-8")
    for argv, says in (
        (["--corpus", str(tmp_path / "none"), "--questions", str(questions)], "no folder"),
        (["--questions", str(questions), "--questions", str(questions)], "give one file"),
        (["--corpus", str(tmp_path)], "--corpus needs --questions"),
        (["--corpus", str(tmp_path), "--questions", str(questions), "--follow-ups"], "together"),
    ):
        with pytest.raises(SystemExit):
            main(argv, None)  # type: ignore[arg-type]  # refused before the config is read
        assert says in capsys.readouterr().err


PAGE = """<!DOCTYPE html><html><head><title>{title}</title></head><body>
<div class="navheader">Prev | Up | Home | Next</div>
<h1>{title}</h1><p>{body}</p>
<div class="navfooter">Prev | Up | Home | Next</div></body></html>"""


@pytest.mark.timeout(240)
def test_a_tiny_html_corpus_is_ingested_and_asked(
    tmp_path: Path,
    model_dir: Path,
    engine,
    config_for,  # noqa: ANN001
) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "admin").mkdir(parents=True)
    pages = {
        "admin/ports.html": ("Ports", "The relay server listens on TCP port 7788 by default."),
        "backup.html": ("Backups", "Nightly backups are written to /srv/backup/nightly at 02:30."),
        "index.html": ("Manual", "This manual covers the relay server."),
    }
    for rel, (title, body) in pages.items():
        (corpus / rel).write_text(PAGE.format(title=title, body=body), encoding="utf-8")
    items = [
        {"question": "Which TCP port does the relay server listen on?",
         "gold_file": "admin/ports.html", "gold_phrase": "port 7788", "answers": ["7788"]},
        {"question": "Where are the nightly backups written?",
         "gold_file": "backup.html", "gold_phrase": "/srv/backup/nightly",
         "answers": ["/srv/backup/nightly"]},
        {"question": "Who wrote the manual?", "gold_file": "missing.html",
         "gold_phrase": "x", "answers": ["nobody"]},
    ]  # fmt: skip
    config = config_for(tmp_path / "data", model_dir)
    out = run_corpus(config, corpus, [("tiny.json", items)], max_new_tokens=8, engine=engine)
    assert f"corpus {corpus}" in out
    ingest = re.search(r"^\| 3 +\| 3 +\| 0 +\| (\d+) +\|", out, re.M)
    assert ingest, out  # 3 pages offered, 3 indexed, none refused
    assert "English questions (tiny.json)" in out and "Korean questions" not in out
    for header in CORPUS_HEADERS:
        assert header in out, header
    row = re.search(r"^\| (\w+) \(default\) +\| 3 +\|(.*)$", out, re.M)
    assert row, out
    cells = [c.strip() for c in row.group(2).split("|")]
    assert cells[3] == "2/3 (67%)"  # the two facts of the corpus were retrieved
    assert cells[5] == "2/3 (67%)"  # cited by their stored names, admin/ports.html too
    assert "gold file not in the corpus: missing.html" in out
    assert json.dumps(items)  # the items are left as they were given
    assert engine.health()  # a lent engine stays open for its owner
