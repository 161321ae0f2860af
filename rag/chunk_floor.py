"""Merging chunks under a floor into their neighbours (pure).

A section of one short line (a page's title block, a "See also" line, a one-line syntax
summary) made a chunk of its own: 139 chunks under 30 tokens on the real sets, each a poor
retrieval target and a wasted slot in the prompt. A chunk smaller than its floor joins the
previous chunk of its section; the first chunk of a section joins the next chunk (of its
section, else of the next one, its heading kept as a line of text); a document's last small
chunk joins the previous chunk. A merged chunk may exceed the budget by less than the floor.
The overlap a small chunk repeats from the chunk before it is not repeated again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from rag.types import ChunkDraft

Floor = Callable[[str], int]  # a chunk's floor in characters, from its text


def _overlap(prev: str, text: str) -> int:
    """How many leading characters of ``text`` end ``prev`` (cut at a word boundary)."""
    for cut in range(min(len(prev), len(text)), 0, -1):
        if (cut == len(text) or text[cut] in " \n") and prev.endswith(text[:cut]):
            return cut
    return 0


def _labelled(d: ChunkDraft, section: str) -> str:
    """``d``'s text, led by its heading where it joins a chunk of another section."""
    return f"{d.section}\n{d.text}" if d.section and d.section != section else d.text


def _append(prev: ChunkDraft, d: ChunkDraft) -> ChunkDraft:
    text = _labelled(d, prev.section)
    cut = _overlap(prev.text, text) if d.section == prev.section else 0
    rest = text[cut:].strip()
    return replace(prev, text=f"{prev.text}\n{rest}" if rest else prev.text)


def _prepend(d: ChunkDraft, nxt: ChunkDraft) -> ChunkDraft:
    return replace(nxt, text=f"{_labelled(d, nxt.section)}\n{nxt.text}", page=d.page or nxt.page)


def merge_small(
    drafts: Sequence[ChunkDraft], floor: Floor, count: Callable[[str], int]
) -> list[ChunkDraft]:
    """One document's chunks with those under ``floor`` merged; ordinals renumbered and token
    counts recounted with ``count``."""
    out: list[ChunkDraft] = []
    pending: list[ChunkDraft] = []  # small chunks waiting for the next chunk
    for d in drafts:
        for p in reversed(pending):
            d = _prepend(p, d)
        pending = []
        small = len(d.text) < floor(d.text)
        if small and out and out[-1].section == d.section:
            out[-1] = _append(out[-1], d)
        elif small:
            pending.append(d)
        else:
            out.append(d)
    for p in pending:
        if out:
            out[-1] = _append(out[-1], p)
        else:
            out.append(p)
    return [replace(d, ordinal=i, token_count=count(d.text)) for i, d in enumerate(out)]
