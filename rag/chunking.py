"""Chunking (pure): sections to chunks of at most ``max_tokens`` with overlap.

``chunk_document`` is what ingestion uses: the budget is in characters, per language
(``rag.chunk_budget``), and chunks under a floor are merged (``rag.chunk_floor``);
``chunk_sections`` does the splitting with any counter (characters there).

Text is split into units: paragraphs; a paragraph too long for one chunk is split into lines
(list items stay whole), a line too long into sentences, a sentence too long into word runs.
Units are packed greedily, and each new chunk repeats trailing units of the previous one, up
to ``overlap_tokens``. Chunks never cross a section boundary, so every chunk has one section
heading for its citation header. Each unit remembers the separator that preceded it, so a chunk
reads like the source text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rag.chunk_budget import ChunkBudget
from rag.chunk_floor import merge_small
from rag.types import ChunkDraft, Section

TokenCounter = Callable[[str], int]

# a sentence ends at . ! ? after a non-digit (so "5. Type" and "3.5" are not split)
_SENTENCE_END = re.compile(r"(?<=[^\d\s][.!?。])\s+")


@dataclass(frozen=True)
class _Unit:
    text: str
    tokens: int
    sep: str  # separator placed before this unit when it follows another one


def _split(text: str, sep: str, pattern: str | re.Pattern, inner_sep: str) -> list[tuple[str, str]]:
    parts = [p.strip() for p in re.split(pattern, text) if p.strip()]
    return [(p, sep if i == 0 else inner_sep) for i, p in enumerate(parts)]


def _units(text: str, max_tokens: int, count: TokenCounter) -> list[_Unit]:
    out: list[_Unit] = []
    # (text, separator-before, level): level 0 paragraph, 1 line, 2 sentence, 3 word run
    todo = [(t, s, 0) for t, s in _split(text, "\n\n", r"\n\s*\n", "\n\n")]
    while todo:
        piece, sep, level = todo.pop(0)
        n = count(piece)
        if n <= max_tokens or level == 3:
            out.append(_Unit(piece, n, sep))
            continue
        if level == 0:
            subs = _split(piece, sep, r"\n", "\n")
        elif level == 1:
            subs = _split(piece, sep, _SENTENCE_END, " ")
        else:
            subs = _word_runs(piece, sep, max_tokens, count)
        if len(subs) == 1 and level < 2:  # nothing to split at this level: go finer
            todo.insert(0, (piece, sep, level + 1))
            continue
        todo[0:0] = [(t, s, level + 1) for t, s in subs]
    return out


def _word_runs(text: str, sep: str, max_tokens: int, count: TokenCounter) -> list[tuple[str, str]]:
    runs: list[tuple[str, str]] = []
    current: list[str] = []
    for word in text.split(" "):
        if current and count(" ".join([*current, word])) > max_tokens:
            runs.append((" ".join(current), sep if not runs else " "))
            current = []
        current.append(word)
    if current:
        runs.append((" ".join(current), sep if not runs else " "))
    return runs


def _join(units: list[_Unit]) -> str:
    return "".join(u.text if i == 0 else u.sep + u.text for i, u in enumerate(units))


def chunk_sections(
    sections: Iterable[Section],
    count: TokenCounter,
    max_tokens: int,
    overlap_tokens: int,
) -> list[ChunkDraft]:
    drafts: list[ChunkDraft] = []
    for section in sections:
        current: list[_Unit] = []
        size = 0
        for unit in _units(section.text, max_tokens, count):
            # each separator may cost a token of its own, hence ``len(current)``
            if current and size + len(current) + unit.tokens > max_tokens:
                drafts.append(_draft(len(drafts), section, current, count))
                carry: list[_Unit] = []
                carried = 0
                for prev in reversed(current):
                    total = carried + prev.tokens
                    if total > overlap_tokens or total + len(carry) + 1 + unit.tokens > max_tokens:
                        break
                    carry.insert(0, prev)
                    carried = total
                current, size = carry, carried
            current.append(unit)
            size += unit.tokens
        # the last unit appended is never emitted yet, so a non-empty tail is a new chunk
        if current:
            drafts.append(_draft(len(drafts), section, current, count))
    return drafts


def _draft(ordinal: int, section: Section, units: list[_Unit], count: TokenCounter) -> ChunkDraft:
    text = _join(units)
    return ChunkDraft(
        ordinal=ordinal,
        section=section.heading,
        page=section.page,
        text=text,
        token_count=count(text),
        ocr_confidence=section.ocr_confidence,
    )


def chunk_document(
    sections: Iterable[Section],
    count_tokens: TokenCounter,
    budget: ChunkBudget | None = None,
) -> list[ChunkDraft]:
    """A document's chunks sized by characters, per section's language (``rag.chunk_budget``),
    with chunks under the floor merged into their neighbours (``rag.chunk_floor``).
    ``token_count`` is counted with ``count_tokens`` (the engine's tokenizer)."""
    budget = budget or ChunkBudget()
    drafts: list[ChunkDraft] = []
    for section in sections:
        b = budget.for_text(section.text)
        drafts.extend(chunk_sections([section], len, b.max_chars, b.overlap_chars))
    return merge_small(drafts, lambda text: budget.for_text(text).floor_chars, count_tokens)
