"""``appliance bench quality --follow-ups``: the conversations the questions are paired into, its
rows, its paired targets (re-lay against append-only), and a smoke run on the real appliance
in which every follow-up is really sent under its row's layout."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.cli import run_appliance

from appliance.bench.quality_ask import collect
from appliance.bench.quality_followups import conversations, follow_up_report, follow_up_rows
from appliance.bench.quality_score import Outcome
from appliance.core.services.chat import DeltaEvent, DoneEvent, RetrievalEvent
from appliance.core.services.settings import ChatSettings
from engine.base import GenerationStats
from rag.prompt import Citation
from rag.verify import verify_answer


def item(question: str, gold: str) -> dict:
    return {"question": question, "gold_file": gold, "answers": ["x"]}


def test_questions_pair_by_language_then_gold_document() -> None:
    items = [
        item("a1", "a.md"),
        item("b1", "b.md"),
        item("가1", "k.md"),
        item("a2", "a.md"),
        item("b2", "b.md"),
        item("c1", "c.md"),
        item("가2", "k.md"),
    ]
    pairs = [(f["question"], s["question"]) for f, s in conversations(items)]
    # same document first (in the file's order), the odd one out left over; never across
    # languages
    assert pairs == [("a1", "a2"), ("b1", "b2"), ("가1", "가2")]


def test_the_rows_are_both_layouts_in_both_generating_modes() -> None:
    defaults = ChatSettings("system", 4, "prefix", 0.0, 256)
    rows = {r.label: r.changes for r in follow_up_rows(defaults)}
    assert list(rows) == [
        "append, generative",
        "re-lay, generative",
        "append, grounded",
        "re-lay, grounded",
    ]
    assert rows["re-lay, grounded"]["layout"] == "relay"
    assert rows["append, generative"]["answer_mode"] == "generative"
    assert rows["append, generative"]["repetition_penalty"] == defaults.repetition_penalty


def _outcome(shown: bool, error: str = "") -> Outcome:
    return Outcome(False, shown, shown, True, False, (), 1.0, 0.5, error=error, question="q")


def test_re_lay_is_held_to_append_only_question_by_question() -> None:
    same = [_outcome(True), _outcome(False)]
    results = {
        "append, generative": same,
        "re-lay, generative": same,
        "append, grounded": [_outcome(True), _outcome(True)],
        "re-lay, grounded": [_outcome(True), _outcome(False)],  # loses the second
    }
    text = "\n".join(follow_up_report(results, 2))
    assert re.search(r"re-lay >= append, fact shown first \(generative\) +\| 1/2 .* \| yes", text)
    assert re.search(r"re-lay >= append, fact shown first \(grounded\) +\| 1/2 .* \| NO", text)
    assert re.search(r"\| grounded +\| shown first +\| 1 +\| 1 +\| 0 +\|", text)
    # a failed follow-up is left out of the pairs and counted as a failed turn
    results["re-lay, grounded"] = [_outcome(True), _outcome(False, error="busy: full")]
    text = "\n".join(follow_up_report(results, 2))
    assert re.search(r"\(grounded\) +\| 1/1 .* \| yes", text)
    assert re.search(r"no failed turns +\| 1 +\| NO", text)
    assert "error (re-lay, grounded): q: busy: full" in text


def test_a_follow_up_is_scored_against_every_source_its_conversation_showed() -> None:
    earlier = "Software requests are reviewed within 3 working days."
    now = "Install software only from the company portal."
    answer = "They review it within 3 working days [1]."
    cited = {1: earlier, 2: now}  # what the service checks the answer against
    check = verify_answer(answer, cited, [now], set(cited))
    assert check.sentences[0].supported

    def turn() -> list:
        citation = Citation(2, 20, 5, "Software", "", None, "it.md", now)
        stats = GenerationStats(100, 0, 10, 0.1, 0.2, "stop")
        return [
            RetrievalEvent([citation], 1.0),
            DeltaEvent(answer),
            DoneEvent(7, 8, answer, stats, 1.0, check),
        ]

    asked = item("How long does a review take?", "it.md")
    # against this turn's sources alone, the first turn's fact would look invented
    assert len(collect(asked, turn).inventions) == 1
    opened: list[int] = []
    shown: list[str] = []
    outcome = collect(asked, turn, opened, earlier=[earlier], shown=shown)
    assert outcome.inventions == () and opened == [7] and shown == [now]


@pytest.mark.timeout(300)
def test_bench_quality_follow_ups_quick_sends_every_row_as_laid_out(
    model_dir: Path, tmp_path: Path
) -> None:
    # two questions of each language: one conversation each, every row, in CI time
    args = ["bench", "quality", "--follow-ups", "--quick", "--limit", "2"]
    out = run_appliance(args, model_dir, tmp_path, 280, ENGINE__NATIVE_ATTENTION="false")
    assert "paired into 2 two-turn conversations" in out
    assert "English follow-ups" in out and "Korean follow-ups" in out
    for row in ("append, generative", "re-lay, generative", "append, grounded", "re-lay, grounded"):
        assert len(re.findall(rf"^\| {re.escape(row)} +\|", out, re.M)) == 2, row
    # every follow-up was answered, and stored as sent under its row's layout (the bench
    # fails a turn sent otherwise)
    assert re.search(r"^\| no failed turns +\| 0 +\| yes +\|$", out, re.M), out
    assert re.search(r"^\| 0 unflagged inventions \(every row\) +\| 0 +\| yes", out, re.M)
