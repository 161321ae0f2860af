"""Answer-bearing passages over fixed scores (pure): a piece that carries the wanted answer
type takes the score of the piece naming its subject, and is joined with it when adjacent."""

from __future__ import annotations

import numpy as np
import pytest

from rag.evidence_passage import TYPE_BONUS, Passage, is_label, passages

TEXT = (
    "Sets the amount of memory for buffers. The value is rounded. The default is 128 MB.\n\n"
    "A new paragraph: 64 MB."
)


def _bounds(text: str, pieces: list[str]) -> list[tuple[int, int]]:
    out = []
    for piece in pieces:
        start = text.index(piece)
        out.append((start, start + len(piece)))
    return out


NONE, NUM = frozenset(), frozenset({"number"})
PIECES = [
    "Sets the amount of memory for buffers.",
    "The value is rounded.",
    "The default is 128 MB.",
    "A new paragraph: 64 MB.",
]


def test_a_value_two_sentences_on_borrows_the_naming_score() -> None:
    fused = np.array([0.7, 0.3, 0.2, 0.25], dtype=np.float32)
    where = [(0, j) for j in range(4)]
    out = passages(fused, where, _bounds(TEXT, PIECES), [TEXT], [NONE, NONE, NUM, NUM])
    assert out[0] == Passage(0, 0, 0, 0, pytest.approx(0.7))
    value = out[2]
    assert value.score == pytest.approx(0.7 + TYPE_BONUS)
    assert (value.first, value.last, value.answer) == (2, 2, 2)  # not adjacent: quoted alone
    # a blank line ends the paragraph: the next one borrows nothing across it
    assert out[3].score == pytest.approx(0.25 + TYPE_BONUS)


def test_an_adjacent_naming_piece_is_joined() -> None:
    fused = np.array([0.2, 0.7], dtype=np.float32)
    text = "--data-checksums\nUse checksums on data pages."
    bounds = _bounds(text, ["--data-checksums", "Use checksums on data pages."])
    assert is_label("--data-checksums") and not is_label("Use checksums on data pages.")
    out = passages(fused, [(0, 0), (0, 1)], bounds, [text], [frozenset({"option"}), NONE])
    assert (out[0].first, out[0].last, out[0].answer) == (0, 1, 0)
    assert out[0].score == pytest.approx(0.7 + TYPE_BONUS)
    # the description is read with its label line above it (rag.evidence_labels)
    assert out[1] == Passage(0, 0, 1, 1, pytest.approx(0.7))


def test_nothing_wanted_keeps_every_score() -> None:
    fused = np.array([0.5, 0.1], dtype=np.float32)
    out = passages(fused, [(0, 0), (1, 0)], [(0, 3), (0, 3)], ["abc", "def"], [NONE, NONE])
    assert [(p.ci, p.first, p.score) for p in out] == [
        (0, 0, pytest.approx(0.5)),
        (1, 0, pytest.approx(0.1)),
    ]
