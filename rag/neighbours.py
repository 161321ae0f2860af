"""Neighbour context (pure): a retrieved chunk read on into the chunks after it in its section.

A manual names a thing at the end of one chunk and states its value at the start of the next
(the chunker cuts by size, not by meaning), so the answer is often just past the chunk that
retrieval found. A retrieved chunk is therefore shown with the rest of the chunks that follow
it in the same document and the same section (``following``: at most ``n``, stopping at the
first one of another section or a gap in the ordinals): their text is appended after the
overlap they repeat, and their stored evidence pieces join the chunk's, shifted to the joined
text. The joined text is a function of the chunk alone (its id and the stored chunks), so the
same chunk always renders the same text and prompts stay prefix-stable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rag.piece_store import ChunkPieces, make_pieces

SEPARATOR = "\n"  # between a chunk and the rest of the next one
_KEY = 24  # leading characters of the next chunk searched for in the previous one


@dataclass(frozen=True)
class Stored:
    """A stored chunk as the neighbour rule reads it: its place and its text."""

    chunk_id: int
    document_id: int
    ordinal: int
    section: str
    text: str
    token_count: int = 0


@dataclass(frozen=True)
class Joined:
    """A chunk read on into its neighbours: the joined text, and for each part (the chunk
    first) its chunk id, the offset of its first kept character in its own text and where
    that character lands in the joined text."""

    text: str
    parts: tuple[tuple[int, int, int], ...]  # (chunk id, cut, shift): own[cut:] at shift
    token_count: int


def following(chunk: Stored, later: Sequence[Stored], n: int) -> list[Stored]:
    """The up to ``n`` chunks right after ``chunk`` in its document and its section, in
    order: ``later`` may hold any chunks; only those at ordinal + 1, + 2, ... of the same
    document count, and the run stops at a gap or at a chunk of another section."""
    if n <= 0:
        return []
    at = {(c.document_id, c.ordinal): c for c in later}
    out: list[Stored] = []
    for step in range(1, n + 1):
        nxt = at.get((chunk.document_id, chunk.ordinal + step))
        if nxt is None or nxt.section != chunk.section:
            break
        out.append(nxt)
    return out


def overlap(prev: str, text: str) -> int:
    """How many leading characters of ``text`` repeat the end of ``prev`` (the chunker's
    overlap): the longest prefix of ``text`` that ``prev`` ends with, 0 when none."""
    key = text[: min(_KEY, len(text))]
    if not key:
        return 0
    at = prev.find(key)
    while at >= 0:
        tail = len(prev) - at
        if text.startswith(prev[at:]):
            return tail
        at = prev.find(key, at + 1)
    return 0


def join(chunk: Stored, after: Sequence[Stored]) -> Joined:
    """``chunk``'s text followed by what each chunk of ``after`` adds (its text past the
    overlap it repeats, leading whitespace dropped), one ``SEPARATOR`` between."""
    text = chunk.text
    parts = [(chunk.chunk_id, 0, 0)]
    tokens = chunk.token_count
    prev = chunk.text
    for nxt in after:
        cut = overlap(prev, nxt.text)
        while cut < len(nxt.text) and nxt.text[cut].isspace():
            cut += 1
        prev = nxt.text
        if cut >= len(nxt.text):
            continue  # it adds nothing
        text += SEPARATOR
        parts.append((nxt.chunk_id, cut, len(text) - cut))
        text += nxt.text[cut:]
        if nxt.token_count:
            tokens += round(nxt.token_count * (len(nxt.text) - cut) / len(nxt.text))
    return Joined(text, tuple(parts), tokens)


def joined_pieces(joined: Joined, pieces: Sequence[ChunkPieces | None]) -> ChunkPieces | None:
    """The pieces of ``joined``: each part's stored pieces (``pieces[i]`` of part ``i``) that
    lie wholly in its kept text, shifted to the joined text.
    None when the chunk's own pieces are missing; a neighbour without pieces adds none."""
    if not pieces or pieces[0] is None:
        return None
    if len(joined.parts) == 1:
        return pieces[0]
    spans: list[tuple[int, int, str]] = []
    vectors: list[np.ndarray] = []
    terms: list[list[str]] = []
    for (_cid, cut, shift), own in zip(joined.parts, pieces, strict=True):
        if own is None or not len(own):
            continue
        keep = [j for j in range(len(own)) if int(own.starts[j]) >= cut]
        own_terms = own.piece_terms()
        for j in keep:
            spans.append((int(own.starts[j]) + shift, int(own.ends[j]) + shift, own.kind(j)))
            terms.append(own_terms[j])
        if keep:
            vectors.append(own.vectors[keep])
    if not spans:
        return pieces[0]
    return make_pieces(spans, np.concatenate(vectors), terms)
