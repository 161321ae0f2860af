"""Terms and definitions (rag.evidence_labels): a definition is quoted with its term above
it, a term with its definition line; shortcut tables and paragraphs are left alone."""

from __future__ import annotations

from rag.evidence_labels import JOIN_MAX_CHARS, Passage, is_label, with_labels


def _layout(text: str, pieces: list[str]) -> tuple[dict, list[tuple[int, int]]]:
    bounds, at = [], 0
    for piece in pieces:
        start = text.index(piece, at)
        bounds.append((start, start + len(piece)))
        at = start + len(piece)
    return {(0, j): j for j in range(len(pieces))}, bounds


def _unit(j: int) -> Passage:
    return Passage(0, j, j, j, 0.5)


DEFS = "SIGINT\nThis is the Fast Shutdown mode. It aborts transactions.\nSIGQUIT\nImmediate."
DEF_PIECES = [
    "SIGINT",
    "This is the Fast Shutdown mode.",
    "It aborts transactions.",
    "SIGQUIT",
    "Immediate.",
]


def test_a_definition_is_read_with_its_term() -> None:
    at, bounds = _layout(DEFS, DEF_PIECES)
    unit = with_labels(_unit(1), at, bounds, [DEFS])
    assert (unit.first, unit.last, unit.answer, unit.score) == (0, 1, 1, 0.5)
    # the second sentence of the line has no term right above it
    assert with_labels(_unit(2), at, bounds, [DEFS]) == _unit(2)


def test_a_term_is_read_with_its_definition_line() -> None:
    at, bounds = _layout(DEFS, DEF_PIECES)
    unit = with_labels(_unit(0), at, bounds, [DEFS])
    assert (unit.first, unit.last) == (0, 2)  # the whole next line, not the next term
    assert DEFS[bounds[unit.first][0] : bounds[unit.last][1]] == (
        "SIGINT\nThis is the Fast Shutdown mode. It aborts transactions."
    )


def test_two_label_lines_above_a_definition() -> None:
    text = "-k\n--data-checksums\nUse checksums on data pages."
    at, bounds = _layout(text, ["-k", "--data-checksums", "Use checksums on data pages."])
    assert with_labels(_unit(2), at, bounds, [text]).first == 0


def test_a_shortcut_table_and_prose_are_left_alone() -> None:
    table = "Ctrl + F10\n단락 기호 표시\nCtrl + F12\n표 삽입"
    at, bounds = _layout(table, ["Ctrl + F10", "단락 기호 표시", "Ctrl + F12", "표 삽입"])
    for j in range(4):  # labels followed by labels: nothing joined here
        assert with_labels(_unit(j), at, bounds, [table]) == _unit(j)
    prose = "Short title\n\nA new paragraph starts. Another sentence."
    at, bounds = _layout(prose, ["Short title", "A new paragraph starts.", "Another sentence."])
    assert with_labels(_unit(1), at, bounds, [prose]) == _unit(1)  # a blank line between
    assert with_labels(_unit(0), at, bounds, [prose]) == _unit(0)
    same_line = "Note: see below. The value is set."
    at, bounds = _layout(same_line, ["Note: see below.", "The value is set."])
    assert with_labels(_unit(1), at, bounds, [same_line]) == _unit(1)


def test_only_sentences_and_within_the_length_limit() -> None:
    at, bounds = _layout(DEFS, DEF_PIECES)
    kinds = ["row", "sentence", "sentence", "sentence", "sentence"]
    assert with_labels(_unit(1), at, bounds, [DEFS], kinds) == _unit(1)
    long = "term\n" + "A definition that goes on. " * 20
    pieces = ["term"] + ["A definition that goes on."] * 20
    at, bounds = _layout(long, pieces)
    unit = with_labels(_unit(0), at, bounds, [long])
    assert bounds[unit.last][1] - bounds[0][0] <= JOIN_MAX_CHARS
    assert unit.last >= 1


def test_is_label() -> None:
    assert is_label("SIGINT") and is_label("ssl_cert_file (string)")
    assert not is_label("This is the Fast Shutdown mode.")
