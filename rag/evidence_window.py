"""The sentence after (pure): for a question that asks what to do, a card unit is read with
the next sentence of its paragraph.

Asked "I clicked a link in a phishing email and typed in my password. What do I do now?", the
sentence that matches is the one restating the situation ("If you already clicked a link,
entered your password, or opened an attachment, do not be embarrassed."); what to do is the
next one ("Report it immediately to the Security team on extension 7700, ..."). A handbook
states the case, then the action. So when the question is procedural
(``rag.answer_cues``), a unit of one sentence is quoted with the sentence after it, when that
one is in the same paragraph (no blank line between), is a sentence (not a list item, a table
row or a label) and the two stay within ``JOIN_MAX_CHARS``; and a unit right before a
numbered list is quoted with its first step ("If your laptop ... is lost or stolen, report it
immediately. ..." / "1. Call the IT Helpdesk on extension 4357, ..."), the list's own blank
line allowed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from rag.answer_cues import is_first_step
from rag.evidence_labels import JOIN_MAX_CHARS, Passage, is_label


def with_next_sentence(
    unit: Passage,
    at: dict[tuple[int, int], int],
    bounds: Sequence[tuple[int, int]],
    texts: Sequence[str],
    kinds: Sequence[str],
) -> Passage:
    """``unit`` with the next sentence of its paragraph, then the first step of a numbered
    list right after (the module doc); ``at`` maps (candidate, piece index) to the flat index
    of ``bounds`` (offsets into ``texts[candidate]``) and ``kinds``."""
    n = at.get((unit.ci, unit.last))
    if n is None or kinds[n] != "sentence":
        return unit
    text = texts[unit.ci]
    start = bounds[at[(unit.ci, unit.first)]][0]
    last = unit.last
    if unit.first == unit.last:
        m = at.get((unit.ci, last + 1))
        if m is not None and kinds[m] == "sentence" and _joins(text, start, bounds[n], bounds[m]):
            last, n = last + 1, m
    m = at.get((unit.ci, last + 1))
    if m is not None and kinds[m] == "item" and is_first_step(text, bounds[m][0]):
        (_, end), (_, stop) = bounds[n], bounds[m]
        if stop - start <= JOIN_MAX_CHARS and "\n\n\n" not in text[end : bounds[m][0]]:
            last = last + 1
    return unit if last == unit.last else replace(unit, last=last)


def _joins(text: str, start: int, piece: tuple[int, int], after: tuple[int, int]) -> bool:
    """Whether the sentence ``after`` reads on from the unit that begins at ``start`` and ends
    with ``piece``: the same paragraph, neither a label, within ``JOIN_MAX_CHARS``."""
    (first, end), (nxt, stop) = piece, after
    if "\n\n" in text[end:nxt] or stop - start > JOIN_MAX_CHARS:
        return False
    return not is_label(text[first:end]) and not is_label(text[nxt:stop])
