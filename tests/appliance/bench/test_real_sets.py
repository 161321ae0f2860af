"""The real-documents sets of ``appliance bench quality --corpus``
(``appliance.bench.real_corpus``): their question files are well formed and large enough,
their gold files are named as ingest names a folder's files, and, where the set's Debian
package is installed, every accepted answer is verbatim in the text ingest extracts from its
gold page (skipped, with the apt line, where it is not)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from appliance.bench.real_corpus import (
    SPLITS,
    MissingPackage,
    RealSet,
    all_sets,
    build,
    extracted_text,
    main,
    pages,
)
from appliance.core.names import stored_path

HANGUL = re.compile(r"[\uac00-\ud7a3]")
FIELDS = ("question", "gold_file", "gold_phrase", "answers")
SETS = all_sets()
ITEMS = [(real, item) for real in SETS for item in real.every_question()]


def _norm(text: str) -> str:
    """The scorer's rule (``quality_score.norm``): whitespace collapsed, case folded."""
    return " ".join(text.split()).casefold()


def _korean(item: dict) -> bool:
    return bool(HANGUL.search(item["question"]))


def _id(pair: tuple[RealSet, dict]) -> str:
    return f"{pair[0].name}:{pair[1]['question'][:40]}"


@cache
def _page_text(path: Path) -> str:
    """A gold page's extracted text, normalised (read once: pages hold several facts)."""
    return _norm(extracted_text(path))


def _installed(real: RealSet) -> None:
    if not real.installed():
        pytest.skip(f"{real.package} is not installed here (to check it: {real.apt})")


def test_the_sets_are_large_enough_in_each_language() -> None:
    korean = [i for _, i in ITEMS if _korean(i)]
    assert len(ITEMS) - len(korean) >= 40
    assert len(korean) >= 30
    for real in SETS:
        dev, held = (real.questions(s) for s in SPLITS)
        assert dev and held and abs(len(dev) - len(held)) <= 1, real.name  # two halves
        assert len({_korean(i) for i in dev + held}) == 1, real.name  # one language a set
        assert 100 <= real.pages <= 200, real.name


def test_no_question_is_asked_twice() -> None:
    questions = [_norm(i["question"]) for _, i in ITEMS]
    assert len(set(questions)) == len(questions)


@pytest.mark.parametrize("pair", ITEMS, ids=_id)
def test_an_item_is_well_formed_and_named_as_ingest_names_it(
    pair: tuple[RealSet, dict],
) -> None:
    _, item = pair
    assert set(FIELDS) <= set(item)
    assert all(isinstance(item[f], str) and item[f].strip() for f in FIELDS[:3])
    answers = item["answers"]
    assert isinstance(answers, list) and answers
    assert all(isinstance(a, str) and a.strip() for a in answers)
    # a folder's file is stored under its path below the folder: that is the gold file's name
    assert stored_path(Path(item["gold_file"]).parts) == item["gold_file"]
    assert item["gold_file"].endswith(".html")


@pytest.mark.parametrize("pair", ITEMS, ids=_id)
def test_every_answer_is_verbatim_in_the_extracted_gold_page(pair: tuple[RealSet, dict]) -> None:
    real, item = pair
    _installed(real)
    text = _page_text(real.source / item["gold_file"])
    for answer in item["answers"]:
        want = _norm(answer)
        assert want in text, answer
        # a substring grader: "4.0" must not count "14.0", nor "5자" "25자"
        for m in re.finditer(re.escape(want), text):
            before, after = text[max(0, m.start() - 1) : m.start()], text[m.end() : m.end() + 2]
            assert not (want[0].isdigit() and before.isdigit()), (answer, m.start())
            assert not (want[-1].isdigit() and re.match(r"\d|[.,]\d", after)), (answer, m.start())


@pytest.mark.parametrize("real", SETS, ids=lambda r: r.name)
def test_a_corpus_holds_every_gold_page_and_is_the_same_each_time(
    real: RealSet, tmp_path: Path
) -> None:
    _installed(real)
    chosen = pages(real)
    assert chosen == pages(real)
    assert 100 <= len(chosen) <= real.pages
    assert {i["gold_file"] for i in real.every_question()} <= set(chosen)
    copied = build(real, tmp_path / real.name)
    assert copied == chosen
    assert sorted(
        p.relative_to(tmp_path / real.name).as_posix()
        for p in (tmp_path / real.name).rglob("*.html")
    ) == sorted(chosen)


def test_a_missing_package_says_how_to_install_it(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    absent = RealSet(
        "x", "some-doc-pkg", tmp_path / "nowhere", "apt-get install some-doc-pkg", ("*.html",), 100
    )
    with pytest.raises(
        MissingPackage, match="some-doc-pkg is not installed.*apt-get install some-doc-pkg"
    ):
        pages(absent)
    with pytest.raises(SystemExit):
        main([str(tmp_path), "no-such-set"])
    assert "no set no-such-set" in capsys.readouterr().err
