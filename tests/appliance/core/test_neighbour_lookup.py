"""Neighbour context from the database (appliance.core.services.neighbours): a retrieved chunk
is read on into the next chunk of its own document and section only, the same way every time,
and its evidence pieces are those of the joined text."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from appliance.core.db.models import Chunk, Document
from appliance.core.services.neighbours import neighbour_pieces, with_neighbours
from rag.piece_store import make_pieces
from rag.sentences import split_pieces
from rag.types import RetrievedChunk

TEXTS = {
    # document 1: two chunks of "Setup" (the second repeats the first's last sentence), then
    # a chunk of another section
    (1, 0, "Setup"): "Sets the port. The server listens there.",
    (1, 1, "Setup"): "The server listens there. The default is 5432.",
    (1, 2, "Other"): "Another section starts here.",
    # document 2: its first chunk is of the same section name, in another document
    (2, 0, "Setup"): "A different manual.",
}


def _store(db) -> dict[tuple[int, int], int]:  # noqa: ANN001 - a migrated Database
    """The chunks of ``TEXTS``; returns (document number, ordinal) -> chunk id."""
    ids = {}
    with db.session() as s:
        docs = {}
        for n in (1, 2):
            doc = Document(
                title=f"Manual {n}",
                source_path=f"/docs/m{n}.html",
                mime="text/html",
                sha256=f"{n:064d}",
                size_bytes=1,
            )
            s.add(doc)
            docs[n] = doc
        s.flush()
        rows = {}
        for (n, ordinal, section), text in TEXTS.items():
            chunk = Chunk(
                document_id=docs[n].id,
                ordinal=ordinal,
                section=section,
                text=text,
                token_count=len(text) // 4,
            )
            s.add(chunk)
            rows[(n, ordinal)] = chunk
        s.flush()
        ids = {key: c.id for key, c in rows.items()}
        s.commit()
    return ids


def _retrieved(cid: int, text: str) -> RetrievedChunk:
    return RetrievedChunk(cid, 0, "Manual", "Setup", None, text, "m.html", 1.0, len(text) // 4)


def test_a_chunk_reads_on_into_the_next_of_its_section(db) -> None:  # noqa: ANN001
    ids = _store(db)
    first, last, alone = ids[(1, 0)], ids[(1, 1)], ids[(2, 0)]
    shown = with_neighbours(
        db,
        [
            _retrieved(first, TEXTS[(1, 0, "Setup")]),
            _retrieved(last, TEXTS[(1, 1, "Setup")]),
            _retrieved(alone, TEXTS[(2, 0, "Setup")]),
        ],
        1,
    )
    # the overlap is not repeated; the next chunk of another section is not joined; nor is
    # a chunk of another document
    assert shown[0].text == "Sets the port. The server listens there.\nThe default is 5432."
    assert shown[0].token_count > len(TEXTS[(1, 0, "Setup")]) // 4
    assert shown[1].text == TEXTS[(1, 1, "Setup")]
    assert shown[2].text == TEXTS[(2, 0, "Setup")]
    # the same chunk renders the same text every time; 0 leaves every chunk as stored
    again = with_neighbours(db, [_retrieved(first, TEXTS[(1, 0, "Setup")])], 1)
    assert again[0].text == shown[0].text
    assert with_neighbours(db, shown[:1], 0) == shown[:1]


def test_the_evidence_pieces_follow_the_joined_text(db) -> None:  # noqa: ANN001
    ids = _store(db)
    stored = {
        cid: make_pieces(
            [(p.start, p.end, p.kind) for p in split_pieces(text)],
            np.eye(4)[: len(split_pieces(text))],
            [[text[p.start : p.end].split()[0]] for p in split_pieces(text)],
        )
        for (n, ordinal, _), text in TEXTS.items()
        for cid in [ids[(n, ordinal)]]
    }
    shown = with_neighbours(db, [_retrieved(ids[(1, 0)], TEXTS[(1, 0, "Setup")])], 1)
    pieces = neighbour_pieces(db, shown, 1, stored.get)[ids[(1, 0)]]
    assert pieces is not None
    text = shown[0].text
    assert [text[s:e] for s, e in zip(pieces.starts, pieces.ends, strict=True)] == [
        "Sets the port.",
        "The server listens there.",
        "The default is 5432.",
    ]
    # the chunk carries its parts: its pieces need no second lookup (no database here)
    assert shown[0].parts
    spans = [(int(a), int(b)) for a, b in zip(pieces.starts, pieces.ends, strict=True)]
    for again in (
        neighbour_pieces(None, shown, 1, stored.get)[ids[(1, 0)]],
        # a joined text that lost its parts (carried from an earlier turn) is looked up again
        neighbour_pieces(db, [replace(shown[0], parts=())], 1, stored.get)[ids[(1, 0)]],
    ):
        assert again is not None
        assert [(int(a), int(b)) for a, b in zip(again.starts, again.ends, strict=True)] == spans
    # a chunk shown as stored (an older turn's citation) keeps its own pieces
    plain = _retrieved(ids[(1, 0)], TEXTS[(1, 0, "Setup")])
    assert neighbour_pieces(db, [plain], 1, stored.get)[ids[(1, 0)]] is stored[ids[(1, 0)]]
