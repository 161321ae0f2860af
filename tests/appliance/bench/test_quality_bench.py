"""``appliance bench quality``: its pure scoring (hits, loops, unflagged inventions, the tables'
cells and targets), and a smoke run of ``--quick`` on the real appliance."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.cli import run_appliance

from appliance.bench.quality_bench import pick_items
from appliance.bench.quality_report import rows, targets
from appliance.bench.quality_score import (
    Outcome,
    hit,
    in_sources,
    loops,
    percentile,
    score,
    summary_row,
    unflagged_inventions,
)
from appliance.core.services.settings import ChatSettings
from rag.verify import AnswerCheck, SentenceVerdict, verify_answer

SOURCE = "The Travel Desk is reachable on extension 3350, Monday to Friday, 9:00 to 17:00."
KO_SOURCE = "미사용 연차는 최대 5일까지 다음 해로 이월할 수 있으며, 신청은 12월 15일까지 합니다."


# ---- hits --------------------------------------------------------------------------------


def test_a_hit_folds_case_and_collapses_whitespace() -> None:
    assert hit("Go to  HTTPS://id.hanbit.example/Reset\nnow", ["id.hanbit.example/reset"])
    assert hit("연차는 최대\n5일까지", ["최대 5일"])
    assert hit("ten or 10 days", ["10 days", "ten days"])


def test_a_hit_normalises_nothing_else() -> None:
    assert not hit("10000 won", ["10,000"])
    assert not hit("about five days", ["5 days"])
    assert not hit("anything", ["", "  "])  # an empty accepted string matches nothing


# ---- loops -------------------------------------------------------------------------------


def test_a_repeated_sentence_loops() -> None:
    text = "First open the portal. Click Reset password now. Click Reset password now. Then"
    assert loops(text)
    assert loops("연차는 최대 5일 이월합니다 정말로.\n연차는 최대 5일 이월합니다 정말로.")


def test_the_same_eight_word_run_three_times_loops() -> None:
    run = "please click the reset button on the portal page "
    assert loops("Start: " + run + "and " + run + "or " + run + "end")
    assert not loops("Start: " + run + "and " + run + "end")  # twice is not a loop


def test_short_repeats_and_plain_answers_do_not_loop() -> None:
    assert not loops("Yes. Yes. Yes.")  # under four words: not a sentence that loops
    assert not loops(
        "Go to https://id.hanbit.example/reset [1]. Enter your employee ID. Choose a new "
        "password of at least 12 characters [1]."
    )
    assert not loops("")


# ---- facts in sources, unflagged inventions -----------------------------------------------


def test_a_fact_is_in_a_source_by_text_or_by_its_digit_runs() -> None:
    assert in_sources("3350", [SOURCE])
    assert in_sources("3,350", [SOURCE])  # thousand separators dropped
    assert in_sources("https://id.hanbit.example/reset.", ["see id.hanbit.example/reset"])
    assert in_sources("https://status.hanbit.example/", ["at https://status.hanbit.example and"])
    assert in_sources("12월 15일", [KO_SOURCE])
    assert in_sources("2024-03-05", ["from 2024.3.5 on"])  # every digit run, zeros aside
    assert not in_sources("12345", [SOURCE])
    assert not in_sources("3350", [KO_SOURCE])
    assert not in_sources("helpdesk@hanbit.example", [SOURCE])
    assert not in_sources("3350", [])


def test_a_flagged_invention_is_not_counted() -> None:
    answer = "The Travel Desk's phone extension is 12345 [1]."
    check = verify_answer(answer, {1: SOURCE}, [SOURCE], {1})
    assert not check.sentences[0].supported  # the verifier flags it ...
    assert unflagged_inventions(answer, check, [SOURCE]) == []  # ... so the user sees a mark


def test_a_quoted_fact_is_no_invention() -> None:
    answer = "Call the Travel Desk on extension 3350 [1]."
    check = verify_answer(answer, {1: SOURCE}, [SOURCE], {1})
    assert check.sentences[0].supported
    assert unflagged_inventions(answer, check, [SOURCE]) == []


def test_an_invented_fact_marked_supported_is_counted() -> None:
    answer = "Call extension 12345 for travel. You can call on Monday."
    first_end = answer.index(".") + 1
    check = AnswerCheck(
        (
            SentenceVerdict(0, first_end, True, (), (), "ok"),
            SentenceVerdict(first_end + 1, len(answer), True, (), (), "ok"),
        ),
        (),
    )
    found = unflagged_inventions(answer, check, [SOURCE])
    assert [(f.sentence, f.facts) for f in found] == [
        ("Call extension 12345 for travel.", ("12345",))
    ]
    assert unflagged_inventions(answer, None, [SOURCE]) == []


# ---- one outcome, the tables, the targets -------------------------------------------------


ITEM = {
    "question": "What is the Travel Desk's extension?",
    "gold_file": "travel.md",
    "answers": ["3350"],
}


def test_the_card_is_what_the_user_sees_first() -> None:
    card_hit = score(
        ITEM,
        "reachable on extension 3350",
        "It is 12345.",
        "travel.md",
        None,
        [SOURCE],
        (1.0, 0.2),
        False,
    )
    assert card_hit.shown_first and card_hit.anywhere and card_hit.gold_cited_first
    no_card = score(ITEM, "", "It is 12345. Ask 3350.", "hr.md", None, [SOURCE], (1.0, 0.2), False)
    assert no_card.shown_first and not no_card.gold_cited_first
    answer_only = score(
        ITEM, "Monday to Friday.", "extension 3350", "travel.md", None, [SOURCE], (1.0, 0.2), False
    )
    assert not answer_only.shown_first and answer_only.anywhere


def _outcome(
    korean: bool, shown: bool, ttft: float, looped: bool = False, stopped: bool = False
) -> Outcome:
    return Outcome(korean, shown, shown, True, looped, (), 2 * ttft, ttft, stopped=stopped)


def test_a_summary_row_counts_and_takes_percentiles() -> None:
    outs = [
        _outcome(False, True, 0.1),
        _outcome(False, False, 0.3, looped=True, stopped=True),
        Outcome(False, False, False, False, False, (), 0.0, 0.0, error="busy: full"),
    ]
    row = summary_row("grounded", outs)
    assert row[:7] == ("grounded", "1/2 (50%)", "1/2 (50%)", "2/2 (100%)", "1", "1", "0")
    assert row[7:] == ("0.40 s", "0.58 s", "0.200 s", "1")
    assert summary_row("extractive", [])[1] == "-"
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5 and percentile([], 95) == 0.0


def test_the_targets_read_the_grounded_row_per_language() -> None:
    gen = [_outcome(False, False, 0.50), _outcome(True, False, 0.50)]
    gro = [_outcome(False, True, 0.51), _outcome(True, False, 0.52)]
    results = {
        "generative, no penalties": gen,
        "generative": gen,
        "grounded": gro,
        "extractive": gro,
    }
    got = {t[0]: (t[1], t[2]) for t in targets(results, [1.0, 2.0, 40.0])}
    assert got["fact shown first, grounded, EN >= 85%"] == ("100%", "yes")
    assert got["fact shown first, grounded, KO >= 85%"] == ("0%", "NO")
    assert got["0 loops (generative and grounded)"] == ("0", "yes")
    assert got["evidence extraction p95 <= 30 ms"][1] == "NO"
    ttft = got["grounded TTFT <= 1.05x generative (median of per-question ratios)"]
    assert ttft == ("1.030x (pooled p50 0.515 s / 0.500 s)", "yes")  # ratios 1.02 and 1.04
    slow = {**results, "grounded": [_outcome(False, True, 0.60), _outcome(True, False, 0.52)]}
    got = {t[0]: (t[1], t[2]) for t in targets(slow, [1.0])}
    assert got["grounded TTFT <= 1.05x generative (median of per-question ratios)"][1] == "NO"


def test_the_rows_and_the_quick_subset() -> None:
    defaults = ChatSettings("system", 4, "prefix", 0.0, 256)
    labelled = {r.label: r.changes for r in rows(defaults)}
    assert list(labelled) == ["generative, no penalties", "generative", "grounded", "extractive"]
    assert labelled["generative, no penalties"]["repetition_penalty"] == 1.0
    assert labelled["generative"]["repetition_penalty"] == defaults.repetition_penalty
    assert labelled["grounded"]["answer_mode"] == "grounded"
    items = [{"question": f"q{i}"} for i in range(10)] + [
        {"question": f"질문 {i}"} for i in range(6)
    ]
    quick = pick_items(items, quick=True)
    assert len(quick) == 12 and sum("질문" in i["question"] for i in quick) == 4
    assert len(pick_items(items, quick=False, limit=3)) == 3
    small = pick_items(items, quick=True, limit=2)
    assert [i["question"] for i in small] == ["q0", "q1", "질문 0", "질문 1"]


# ---- the command ------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_bench_quality_quick_prints_every_mode(model_dir: Path, tmp_path: Path) -> None:
    # two questions of each language: the command, every row and both tables, in CI time
    args = ["bench", "quality", "--quick", "--limit", "2"]
    out = run_appliance(args, model_dir, tmp_path, 280, ENGINE__NATIVE_ATTENTION="false")
    assert "max_new_tokens 32" in out and "repetition_penalty" in out
    assert "English questions" in out and "Korean questions" in out
    for header in (
        "fact shown first",
        "fact anywhere",
        "1st citation gold",
        "loops",
        "unflagged inventions",
        "latency p50",
        "latency p95",
        "TTFT p50",
    ):
        assert out.count(header) >= 2, header
    for mode in ("generative, no penalties", "generative", "grounded", "extractive"):
        # one row in each language's table
        assert len(re.findall(rf"^\| {re.escape(mode)} +\|", out, re.M)) == 2, mode
    assert "| grounded TTFT <= 1.05x generative (median of per-question ratios)" in out
    assert "(2 EN, 2 KO)" in out
