"""The sample corpus's QA sets, the data of ``appliance bench quality``: ``qa.json`` (the one
the evidence ranking was tuned on) and ``qa_heldout.json`` (questions it was not tuned on, for
``--questions``). Every item points at a shipped document that holds its gold phrase and its
accepted answers verbatim; ``qa.json`` is large enough and a third Korean; no question is in
both."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from appliance.core.config import SAMPLE_CORPUS

QA_FILE = SAMPLE_CORPUS / "qa.json"
HELD_OUT_FILE = SAMPLE_CORPUS / "qa_heldout.json"
HANGUL = re.compile(r"[\uac00-\ud7a3]")
FIELDS = ("question", "gold_file", "gold_phrase", "answers")
ITEMS: list[dict] = json.loads(QA_FILE.read_text(encoding="utf-8"))
HELD_OUT: list[dict] = json.loads(HELD_OUT_FILE.read_text(encoding="utf-8"))
EVERY = ITEMS + HELD_OUT


def _norm(text: str) -> str:
    """The grader's rule: whitespace collapsed, case folded."""
    return " ".join(text.split()).casefold()


def _inside_a_longer_number(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] (an answer that starts or ends with a digit) is part of a larger
    number there: "5일" in "25일", "50,000원" in "150,000원"."""
    before = text[max(0, start - 2) : start]
    after = text[end : end + 2]
    grows_left = text[start].isdigit() and bool(re.search(r"(\d|\d[,.])$", before))
    grows_right = text[end - 1].isdigit() and bool(re.match(r"(\d|[,.]\d)", after))
    return grows_left or grows_right


def _gold_text(item: dict) -> str:
    return (SAMPLE_CORPUS / item["gold_file"]).read_text(encoding="utf-8")


def test_the_set_is_large_enough_and_a_third_korean() -> None:
    korean = [i for i in ITEMS if HANGUL.search(i["question"])]
    assert len(ITEMS) >= 40
    assert len(korean) >= 14
    assert 3 * len(korean) >= len(ITEMS)


def test_no_question_is_asked_twice() -> None:
    questions = [_norm(i["question"]) for i in EVERY]  # nor in both sets
    assert len(set(questions)) == len(questions)
    assert len(HELD_OUT) >= 20 and sum(bool(HANGUL.search(i["question"])) for i in HELD_OUT) >= 8


@pytest.mark.parametrize("item", EVERY, ids=lambda i: i["question"][:40])
def test_an_item_is_well_formed(item: dict) -> None:
    assert set(FIELDS) <= set(item)
    assert all(isinstance(item[f], str) and item[f].strip() for f in FIELDS[:3])
    answers = item["answers"]
    assert isinstance(answers, list) and answers
    assert all(isinstance(a, str) and a.strip() for a in answers)
    assert len({_norm(a) for a in answers}) == len(answers)


@pytest.mark.parametrize("item", EVERY, ids=lambda i: i["question"][:40])
def test_the_gold_file_holds_the_phrase_and_every_answer(item: dict) -> None:
    path = SAMPLE_CORPUS / item["gold_file"]
    assert path.parent == SAMPLE_CORPUS and path.suffix in {".md", ".txt"} and path.is_file()
    text = _gold_text(item)
    assert item["gold_phrase"] in text
    for answer in item["answers"]:
        assert answer in text, answer
    # the phrase is the evidence for the fact: one accepted answer is inside it
    assert any(a in item["gold_phrase"] for a in item["answers"])


@pytest.mark.parametrize("item", EVERY, ids=lambda i: i["question"][:40])
def test_an_answer_never_hits_a_larger_number_of_its_file(item: dict) -> None:
    # a grader matches substrings: "5일" would count "최대 25일" as a hit
    text = _gold_text(item)
    for answer in item["answers"]:
        for m in re.finditer(re.escape(answer), text):
            assert not _inside_a_longer_number(text, m.start(), m.end()), (answer, m.start())


@pytest.mark.parametrize("item", EVERY, ids=lambda i: i["question"][:40])
def test_a_korean_question_is_answered_from_a_korean_document(item: dict) -> None:
    korean = bool(HANGUL.search(item["question"]))
    assert korean == bool(HANGUL.search(item["gold_phrase"]))
    assert korean == bool(HANGUL.search(_gold_text(item)))


def test_every_korean_document_is_asked_about() -> None:
    korean = {
        p.name
        for p in Path(SAMPLE_CORPUS).iterdir()
        if p.suffix in {".md", ".txt"} and HANGUL.search(p.read_text(encoding="utf-8"))
    }
    asked = [i["gold_file"] for i in ITEMS]
    assert len(korean) >= 4
    assert all(asked.count(name) >= 2 for name in korean)
