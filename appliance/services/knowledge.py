"""The knowledge base: owns the vector index, keeps it in step with the chunk table, retrieves.

The database is the source of truth. Every change commits chunks to the DB first and then
updates and atomically saves the index; on start ``reconcile`` re-embeds chunks the index lacks
and drops vectors whose chunks are gone, so a crash between the two steps heals itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import select

from appliance.db.models import Chunk, Document
from appliance.db.session import Database
from rag.embeddings import Embedder
from rag.index import VectorIndex
from rag.prompt import chunk_header
from rag.types import RetrievedChunk

log = logging.getLogger(__name__)


def embedding_text(title: str, section: str, text: str) -> str:
    return f"{chunk_header(title, section, None)}\n{text}"


class KnowledgeBase:
    def __init__(self, db: Database, embedder: Embedder, index_dir: Path) -> None:
        self.db = db
        self.embedder = embedder
        self.index_dir = index_dir
        self._lock = threading.RLock()
        loaded = VectorIndex.load(index_dir, embedder.dim, embedder.name)
        self.index = loaded or VectorIndex(embedder.dim, embedder.name)

    def reconcile(self) -> tuple[int, int]:
        """Make the index hold exactly the DB's chunks; return (added, removed)."""
        with self._lock, self.db.session() as s:
            rows = s.execute(
                select(Chunk.id, Chunk.section, Chunk.text, Document.title).join(Document)
            ).all()
            in_db = {r.id for r in rows}
            in_index = self.index.ids()
            stale = sorted(in_index - in_db)
            missing = [r for r in rows if r.id not in in_index]
            removed = self.index.remove(stale)
            if missing:
                vecs = self.embedder.embed(
                    [embedding_text(r.title, r.section, r.text) for r in missing]
                )
                self.index.add([r.id for r in missing], vecs)
            if stale or missing:
                self.index.save(self.index_dir)
            return len(missing), removed

    def add_chunks(self, ids: Sequence[int], texts: Sequence[str]) -> None:
        vecs = self.embedder.embed(list(texts))
        with self._lock:
            self.index.add(ids, vecs)
            self.index.save(self.index_dir)

    def remove_chunks(self, ids: Sequence[int]) -> None:
        with self._lock:
            self.index.remove(ids)
            self.index.save(self.index_dir)

    def retrieve(self, query: str, k: int) -> tuple[list[RetrievedChunk], float]:
        """Top-k chunks for ``query`` and the time it took in milliseconds."""
        start = time.perf_counter()
        vec = self.embedder.embed([query])[0]
        with self._lock:
            hits = self.index.search(vec, k)
        if not hits:
            return [], (time.perf_counter() - start) * 1000
        with self.db.session() as s:
            rows = {
                c.id: (c, d)
                for c, d in s.execute(
                    select(Chunk, Document).join(Document).where(Chunk.id.in_([i for i, _ in hits]))
                ).all()
            }
        out = [
            RetrievedChunk(
                chunk_id=c.id,
                document_id=d.id,
                title=d.title,
                section=c.section,
                page=c.page,
                text=c.text,
                source=Path(d.source_path).name,
                score=score,
            )
            for cid, score in hits
            if cid in rows
            for c, d in [rows[cid]]
        ]
        return out, (time.perf_counter() - start) * 1000
