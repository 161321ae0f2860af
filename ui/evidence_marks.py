"""The evidence card's sentences marked in their sources (pure): each card sentence gets an
anchor id, which the card's ``[n]`` links to and the sources list puts on the marked span."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

# card sentences: ``{number, chunk_id, start, end, text, score}``, offsets into the chunk's text
Card = Sequence[Mapping[str, Any]]


def evidence_anchor(number: int, index: int) -> str:
    """The id of the ``index``-th card sentence of source ``number`` in the sources list."""
    return f"evidence-{number}-{index}"


def anchored(card: Card) -> list[tuple[Mapping[str, Any], str]]:
    seen: dict[int, int] = {}
    out = []
    for s in card:
        n = int(s["number"])
        out.append((s, evidence_anchor(n, seen.get(n, 0))))
        seen[n] = seen.get(n, 0) + 1
    return out


def highlight_chunk(text: str, number: int, card: Card) -> str:
    """The chunk's text, escaped, with the card's sentences of source ``number`` marked (each
    with the id its card link opens)."""
    spans = sorted(
        (
            (int(s["start"]), int(s["end"]), anchor)
            for s, anchor in anchored(card)
            if int(s["number"]) == number
        ),
    )
    out, at = [], 0
    for start, end, anchor in spans:
        if start < at or end > len(text):
            continue
        out += [
            html.escape(text[at:start]),
            f"<mark class='evidence' id='{anchor}'>{html.escape(text[start:end])}</mark>",
        ]
        at = end
    out.append(html.escape(text[at:]))
    return "".join(out).strip()
