"""Neighbour context from the database: each retrieved chunk joined with the chunks after it
in its section (``rag.neighbours``), and the evidence pieces of the joined text.

One query reads the chunks at the next ``n`` ordinals of the retrieved chunks' documents (the
``(document_id, ordinal)`` index); ``rag.neighbours.following`` keeps those of the same section.
The joined text depends only on the chunk and the stored chunks, so a chunk renders the same
text on every turn (prefix-stable prompts).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from sqlalchemy import and_, or_, select

from appliance.core.db.models import Chunk
from appliance.core.db.session import Database
from rag.neighbours import Joined, Stored, following, join, joined_pieces
from rag.piece_store import ChunkPieces
from rag.types import RetrievedChunk


def stored_chunks(
    db: Database, ids: Sequence[int], n: int
) -> tuple[dict[int, Stored], list[Stored]]:
    """The stored chunks of ``ids`` (by id) and those at the ``n`` ordinals after each."""
    if not ids:
        return {}, []
    with db.session() as s:
        own = {
            c.id: Stored(c.id, c.document_id, c.ordinal, c.section, c.text, c.token_count)
            for c in s.execute(select(Chunk).where(Chunk.id.in_(list(ids)))).scalars()
        }
        if not own or n <= 0:
            return own, []
        near = or_(
            *(
                and_(
                    Chunk.document_id == c.document_id,
                    Chunk.ordinal > c.ordinal,
                    Chunk.ordinal <= c.ordinal + n,
                )
                for c in own.values()
            )
        )
        later = [
            Stored(c.id, c.document_id, c.ordinal, c.section, c.text, c.token_count)
            for c in s.execute(select(Chunk).where(near)).scalars()
        ]
    return own, later


def joined_chunks(db: Database, ids: Sequence[int], n: int) -> dict[int, Joined]:
    """Each stored chunk of ``ids`` joined with up to ``n`` chunks after it in its section."""
    own, later = stored_chunks(db, ids, n)
    return {cid: join(chunk, following(chunk, later, n)) for cid, chunk in own.items()}


def with_neighbours(db: Database, chunks: Sequence[RetrievedChunk], n: int) -> list[RetrievedChunk]:
    """``chunks``, each with its text read on into up to ``n`` chunks after it in its section
    (``n`` <= 0: as they are)."""
    if n <= 0 or not chunks:
        return list(chunks)
    joined = joined_chunks(db, [c.chunk_id for c in chunks], n)
    out = []
    for c in chunks:
        j = joined.get(c.chunk_id)
        if j is None or len(j.parts) == 1:
            out.append(c)
        else:
            token_count = j.token_count or c.token_count
            out.append(replace(c, text=j.text, token_count=token_count, parts=j.parts))
    return out


def neighbour_pieces(
    db: Database,
    chunks: Sequence[RetrievedChunk],
    n: int,
    pieces_of: Callable[[int], ChunkPieces | None],
) -> dict[int, ChunkPieces | None]:
    """The evidence pieces of each of ``chunks`` as shown (``with_neighbours``): a chunk whose
    text is its joined text gets the joined pieces; one shown as stored, its own pieces. A
    chunk ``with_neighbours`` read on carries its parts, so only one that does not (a source
    carried from an earlier turn) is looked up again."""
    if n <= 0:
        return {c.chunk_id: pieces_of(c.chunk_id) for c in chunks}
    unknown = [c.chunk_id for c in chunks if not c.parts]
    joined = joined_chunks(db, unknown, n) if unknown else {}
    out: dict[int, ChunkPieces | None] = {}
    for c in chunks:
        j = Joined(c.text, c.parts, c.token_count) if c.parts else joined.get(c.chunk_id)
        if j is not None and len(j.parts) > 1 and j.text == c.text:
            out[c.chunk_id] = joined_pieces(j, [pieces_of(cid) for cid, _, _ in j.parts])
        else:
            out[c.chunk_id] = pieces_of(c.chunk_id)
    return out
