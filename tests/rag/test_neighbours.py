"""The neighbour rule (rag.neighbours): a chunk is read on into the chunks after it in its own
document and section only, after the overlap they repeat, with their pieces shifted."""

from __future__ import annotations

import numpy as np

from rag.neighbours import SEPARATOR, Stored, following, join, joined_pieces, overlap
from rag.piece_store import make_pieces
from rag.sentences import split_pieces


def _stored(cid: int, doc: int, ordinal: int, section: str, text: str) -> Stored:
    return Stored(cid, doc, ordinal, section, text, token_count=len(text) // 4)


def _pieces(text: str, seed: int):  # noqa: ANN202 - a ChunkPieces
    spans = [(p.start, p.end, p.kind) for p in split_pieces(text)]
    vecs = np.random.default_rng(seed).normal(size=(len(spans), 4))
    return make_pieces(spans, vecs, [[text[s:e].split()[0].lower()] for s, e, _ in spans])


A = _stored(1, 10, 0, "Setup", "Sets the port. The server listens there.")
B = _stored(2, 10, 1, "Setup", "The server listens there. The default is 5432.")
C = _stored(3, 10, 2, "Other", "Unrelated section.")
OTHER_DOC = _stored(4, 11, 1, "Setup", "Another document's chunk.")


def test_following_stays_in_the_section_and_the_document() -> None:
    later = [B, C, OTHER_DOC]
    assert following(A, later, 1) == [B]
    assert following(A, later, 3) == [B]  # stops at the chunk of another section
    assert following(B, later, 2) == []  # the next one is of another section
    assert following(_stored(5, 11, 0, "Setup", "x"), later, 1) == [OTHER_DOC]
    assert following(A, [C, OTHER_DOC], 2) == []  # a gap: ordinal 1 of doc 10 is absent
    assert following(A, later, 0) == []


def test_overlap_finds_the_repeated_head() -> None:
    assert overlap(A.text, B.text) == len("The server listens there.")
    assert overlap("abc", "def") == 0
    assert overlap("", "x") == 0 and overlap("x", "") == 0


def test_join_appends_only_what_the_next_chunk_adds() -> None:
    joined = join(A, [B])
    assert joined.text == A.text + SEPARATOR + "The default is 5432."
    cid, cut, shift = joined.parts[1]
    assert cid == B.chunk_id
    assert joined.text[shift + cut :] == B.text[cut:]
    assert joined.token_count > A.token_count
    assert join(A, []).text == A.text
    assert join(A, [B]) == join(A, [B])  # deterministic


def test_joined_pieces_are_verbatim_in_the_joined_text() -> None:
    joined = join(A, [B])
    pieces = joined_pieces(joined, [_pieces(A.text, 1), _pieces(B.text, 2)])
    assert pieces is not None
    texts = [joined.text[s:e] for s, e in zip(pieces.starts, pieces.ends, strict=True)]
    # B's repeated sentence is not taken twice
    assert texts == ["Sets the port.", "The server listens there.", "The default is 5432."]
    assert pieces.vectors.shape == (3, 4)
    assert [t[0] for t in pieces.piece_terms()] == ["sets", "the", "the"]


def test_joined_pieces_without_own_pieces_is_none() -> None:
    joined = join(A, [B])
    assert joined_pieces(joined, [None, _pieces(B.text, 2)]) is None
    own = _pieces(A.text, 1)
    assert joined_pieces(joined, [own, None]) is not None
