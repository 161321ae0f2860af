"""Terms and definitions (pure): a card unit read with the label line that names it.

Reference manuals are definition lists: a term on a line of its own ("SIGINT", "-k" /
"--data-checksums", "sqlite3.paramstyle¶", "ssl_cert_file (string)"), then the line that
defines it. A definition quoted without its term answers "which signal?" with "This is the
Fast Shutdown mode."; a term quoted alone answers nothing. So a unit that is a sentence is
read with up to ``LABELS`` label lines right above it, and a unit that is a label, followed by
a sentence on the next line, is read with that line (its sentences, while the whole stays
within ``JOIN_MAX_CHARS``). Both stay in their paragraph (no blank line), take only sentence
pieces (not list items or table rows), and keep the unit's score. A label followed by another
label ("Ctrl + F12" / "표 삽입", a shortcut table) is left to ``rag.evidence_passage``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

JOIN_MAX_CHARS = 400  # a passage longer than this is not joined into one unit
LABEL_MAX_CHARS = 40  # a piece this short with no sentence end is a label ("Ctrl + F12")
LABELS = 2  # label lines above a sentence quoted with it ("-k" / "--data-checksums")
_SENTENCE_END = re.compile(r"[.!?。:](?:\s|$)")


@dataclass(frozen=True)
class Passage:
    """One unit of the card: pieces ``first``..``last`` (inclusive) of candidate ``ci``, its
    score, and the piece that carries the answer."""

    ci: int
    first: int
    last: int
    answer: int
    score: float


def is_label(piece: str) -> bool:
    """Whether ``piece`` is a label line: short, and no sentence end."""
    return len(piece.strip()) <= LABEL_MAX_CHARS and not _SENTENCE_END.search(piece)


def with_labels(
    unit: Passage,
    at: dict[tuple[int, int], int],
    bounds: Sequence[tuple[int, int]],
    texts: Sequence[str],
    kinds: Sequence[str] | None = None,
) -> Passage:
    """``unit`` read with its term above it, or, a term itself, with its definition line
    (the module doc). ``at`` maps (candidate, piece index) to the flat index of ``bounds``
    (offsets into ``texts[candidate]``) and ``kinds`` (None: every piece a sentence)."""
    text = texts[unit.ci]

    def piece(j: int) -> int | None:
        n = at.get((unit.ci, j))
        if n is None or (kinds is not None and kinds[n] != "sentence"):
            return None
        return n

    def gap(lo: int, hi: int) -> str:
        return text[bounds[lo][1] : bounds[hi][0]]

    first, last = piece(unit.first), piece(unit.last)
    if first is None or last is None:
        return unit
    start, end = bounds[first][0], bounds[last][1]
    if not is_label(text[start:end]):
        j = unit.first
        for _ in range(LABELS):
            m = piece(j - 1)
            if m is None or not _next_line(gap(m, at[(unit.ci, j)])):
                break
            if (
                not is_label(text[bounds[m][0] : bounds[m][1]])
                or end - bounds[m][0] > JOIN_MAX_CHARS
            ):
                break
            j -= 1
        return unit if j == unit.first else replace(unit, first=j)
    # a term: its definition is the next line, when that is a sentence
    j, prev = unit.last, last
    while (m := piece(j + 1)) is not None and bounds[m][1] - start <= JOIN_MAX_CHARS:
        between = gap(prev, m)
        if j == unit.last:
            if not _next_line(between) or is_label(text[bounds[m][0] : bounds[m][1]]):
                break
        elif "\n" in between:
            break  # the definition line ends
        j, prev = j + 1, m
    return unit if j == unit.last else replace(unit, last=j)


def _next_line(between: str) -> bool:
    """Whether the text between two pieces is one line break (and spaces): the next line of
    the same paragraph."""
    return "\n" in between and "\n\n" not in between
