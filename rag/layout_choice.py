"""Choosing a turn's layout (pure): build the candidates ``rag.layout`` offers, predict each
one's uncached tokens with the cache shadow, send the cheapest."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rag.layout import (
    ADAPTIVE,
    APPEND,
    LAYOUTS,
    RELAY,
    Conversation,
    Layout,
    Order,
    append_layout,
    relay_layout,
)
from rag.types import RetrievedChunk

__all__ = ["ADAPTIVE", "choose", "lay_out"]


def choose(
    candidates: Sequence[Layout],
    prompt_tokens: Callable[[Layout], int],
    cached_tokens: Callable[[Layout], int],
) -> tuple[Layout, dict[str, tuple[int, int]]]:
    """The candidate with the fewest predicted uncached tokens (prompt tokens minus what the
    shadow holds), ties to the fewest prompt tokens, then the first given; and per kind its
    (prompt tokens, predicted cached tokens). The first candidate is the baseline (append): a
    later one that would send more prompt tokens than it is not taken, so the chosen layout
    never sends more than appending would."""
    if not candidates:
        raise ValueError("no layout to choose from")
    scored: dict[str, tuple[int, int]] = {}
    best: tuple[tuple[int, int], Layout] | None = None
    for layout in candidates:
        tokens, held = prompt_tokens(layout), cached_tokens(layout)
        scored[layout.kind] = (tokens, held)
        if best is not None and tokens > scored[candidates[0].kind][0]:
            continue
        score = (tokens - min(held, tokens), tokens)
        if best is None or score < best[0]:
            best = (score, layout)
    assert best is not None
    return best[1], scored


def lay_out(
    kind: str,
    conv: Conversation,
    question: str,
    retrieved: Sequence[RetrievedChunk],
    order: Order,
    prompt_tokens: Callable[[Layout], int],
    cached_tokens: Callable[[Layout], int],
    candidates: Sequence[RetrievedChunk] = (),
) -> tuple[Layout, dict[str, tuple[int, int]]]:
    """This turn's layout under ``kind`` (``LAYOUTS``): ``adaptive`` predicts both and sends the
    cheaper; a first turn is always appended (there is no history to re-lay)."""
    if kind not in LAYOUTS:
        raise ValueError(f"unknown layout {kind!r}; one of {', '.join(LAYOUTS)}")
    if not conv.sent or kind == APPEND:
        kinds = (APPEND,)
    elif kind == RELAY:
        kinds = (RELAY,)
    else:
        kinds = (APPEND, RELAY)
    build = {APPEND: append_layout, RELAY: relay_layout}
    # the first layout counts the turn's chunks as retrieved, a second one does not
    layouts = [
        build[k](conv, question, retrieved, order, candidates, i == 0) for i, k in enumerate(kinds)
    ]
    return choose(layouts, prompt_tokens, cached_tokens)
