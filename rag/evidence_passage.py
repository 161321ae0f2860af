"""Answer-bearing passages (pure): the piece that holds what the question asks for, read with
the piece that names what it is about.

A manual names a thing in one sentence and states its value a sentence or two later ("Sets the
amount of memory the server uses for shared memory buffers. If this value is specified without
units, it is taken as blocks. The default is typically 128 megabytes."), or gives an option or
a key on its own line before the line that says what it does ("--data-checksums" / "Use
checksums on data pages ...", "Ctrl + F12" / "표 삽입"). The piece that shares the question's
words is the naming one; the fact is beside it. So a piece that carries an answer type the
question asks for (``rag.answer_type``) gets ``TYPE_BONUS`` for each such type, and takes the
score of a naming piece when that is higher: the piece right after it, and for a sentence
(a label describes what follows it) up to ``REACH`` pieces before it, not past another piece
that carries the wanted types it carries nor across a blank line. A neighbour it borrows
from is quoted with it as one passage (one verbatim span of the chunk), so the card reads
"<what> <value>". Measured in ``rag.evidence``'s docstring.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rag.evidence_labels import JOIN_MAX_CHARS, Passage, is_label, with_labels

TYPE_BONUS = 0.1  # per answer type the piece carries of those the question asks for
REACH = 3  # pieces before an answer sentence whose score it may take


def passages(
    fused: np.ndarray,
    where: Sequence[tuple[int, int]],
    bounds: Sequence[tuple[int, int]],
    texts: Sequence[str],
    carried: Sequence[frozenset[str]],
    kinds: Sequence[str] | None = None,
) -> list[Passage]:
    """One passage per piece (``where[n]`` = (candidate, piece index), ``bounds[n]`` its
    offsets into ``texts[candidate]``, ``carried[n]`` the wanted answer types it carries).
    A piece that carries some scores ``TYPE_BONUS`` a type more, and may borrow the score of
    a piece that names its subject, within its paragraph (no blank line between): the piece
    right after it, and for a sentence (not a label) those up to ``REACH`` before it, back
    to the previous piece that carries every wanted type it carries (that one states its own
    value; one stating another kind, a file beside a default, does not stop it). It is
    joined with the piece it borrows from when they are neighbours. Each passage is then read
    with its term, or a term with its definition (``rag.evidence_labels``; ``kinds[n]``: the
    piece's kind, None: every piece a sentence)."""
    at = {w: n for n, w in enumerate(where)}
    out: list[Passage] = []
    for n, (ci, j) in enumerate(where):
        best = Passage(ci, j, j, j, float(fused[n]) + TYPE_BONUS * len(carried[n]))
        if carried[n]:
            text = texts[ci]
            back = 0 if is_label(text[bounds[n][0] : bounds[n][1]]) else REACH
            for d in (-1, *range(1, back + 1)):
                m = at.get((ci, j - d))
                lo, hi = (m, n) if d > 0 else (n, m)
                if m is None or "\n\n" in text[bounds[lo][1] : bounds[hi][0]]:
                    if d > 0:
                        break  # no piece there, or another paragraph: none further back
                    continue
                joined = abs(d) == 1 and bounds[hi][1] - bounds[lo][0] <= JOIN_MAX_CHARS
                # a joined pair carries what either of its pieces carries
                types = carried[n] | carried[m] if joined else carried[n]
                score = float(fused[m]) + TYPE_BONUS * len(types)
                if score > best.score:
                    first, last = (lo, hi) if joined else (n, n)
                    best = Passage(ci, where[first][1], where[last][1], j, score)
                if d > 0 and carried[m] and carried[m] >= carried[n]:
                    break  # the value of what the pieces before it name
        out.append(with_labels(best, at, bounds, texts, kinds))
    return out
