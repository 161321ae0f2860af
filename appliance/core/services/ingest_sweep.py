"""Sweeping blocks that just became repeated out of a collection's stored chunks.

When an upload makes a line repeated across the collection (``rag.boilerplate``), the
documents stored before it still hold that line in their chunks. They are not re-chunked (the
original files are not kept): the line is taken out of each chunk that holds it, a chunk left
empty is removed (unless it is its document's only one), and the changed chunks are indexed
again. Chunk boundaries of those documents stay as they were.
"""

from __future__ import annotations

import logging

from sqlalchemy import select

from appliance.core.db.models import Document
from appliance.core.db.session import Database
from appliance.core.services.knowledge import KnowledgeBase, embedding_text
from rag.block_store import BlockStore
from rag.boilerplate import strip_lines
from rag.chunking import TokenCounter

log = logging.getLogger(__name__)


def sweep_blocks(
    db: Database,
    knowledge: KnowledgeBase,
    blocks: BlockStore,
    count_tokens: TokenCounter,
    collection: str,
    newly: frozenset[str],
    keep: set[str],
) -> int:
    """Take the ``newly`` repeated blocks out of the chunks of the collection's documents
    other than ``keep`` (stored paths); returns how many chunks changed or went."""
    changed: list[tuple[int, str]] = []
    emptied: list[int] = []
    stored = blocks.collection(collection)
    with db.session() as s:
        docs = s.scalars(select(Document).where(Document.collection == collection)).all()
        for doc in docs:
            if doc.source_path in keep or not stored.get(doc.source_path, frozenset()) & newly:
                continue
            for chunk in list(doc.chunks):
                text = strip_lines(chunk.text, newly)
                if text == chunk.text:
                    continue
                if not text and len(doc.chunks) > 1:
                    emptied.append(chunk.id)
                    doc.chunks.remove(chunk)
                    s.delete(chunk)
                elif text:
                    chunk.text, chunk.token_count = text, count_tokens(text)
                    changed.append((chunk.id, embedding_text(doc.title, chunk.section, text)))
    # committed: now the indexes (should the process die here, the changed chunks keep the
    # vectors of their old text until a reindex)
    if emptied:
        knowledge.remove_chunks(emptied)
    if changed:
        knowledge.add_chunks([i for i, _ in changed], [t for _, t in changed], collection)
    if changed or emptied:
        log.info(
            "%s: repeated blocks swept from %d chunks", collection, len(changed) + len(emptied)
        )
    return len(changed) + len(emptied)
