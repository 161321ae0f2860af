"""The knowledge base: owns the vector and BM25 indexes, keeps them in step with the chunk
table, and retrieves (hybrid, fused by RRF) within the collections a caller may read.

The database is the source of truth. Every change commits chunks to the DB first and then
updates and atomically saves the indexes; on start ``reconcile`` adds chunks an index lacks
and drops entries whose chunks are gone, so a crash between the two steps heals itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import select

from appliance.core.db.models import Chunk, Document
from appliance.core.db.session import Database
from rag.bm25 import BM25Index
from rag.embeddings import Embedder
from rag.hybrid import HybridRetriever
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
        self.bm25 = BM25Index.load(index_dir) or BM25Index()
        self.collection_of: dict[int, str] = {}  # chunk id -> collection, for access checks
        self.hybrid = HybridRetriever(self.index, self.bm25, embed=self.embedder.embed)

    def reconcile(self) -> tuple[int, int]:
        """Make both indexes hold exactly the DB's chunks; return (added, removed) vectors."""
        with self._lock, self.db.session() as s:
            rows = s.execute(
                select(
                    Chunk.id, Chunk.section, Chunk.text, Document.title, Document.collection
                ).join(Document)
            ).all()
            self.collection_of = {r.id: r.collection for r in rows}
            in_db = set(self.collection_of)
            added = removed = 0
            for index, embed in ((self.index, True), (self.bm25, False)):
                have = index.ids()
                stale = sorted(have - in_db)
                missing = [r for r in rows if r.id not in have]
                gone = index.remove(stale) if stale else 0
                if missing:
                    texts = [embedding_text(r.title, r.section, r.text) for r in missing]
                    ids = [r.id for r in missing]
                    index.add(ids, self.embedder.embed(texts) if embed else texts)
                if stale or missing:
                    index.save(self.index_dir)
                if embed:
                    added, removed = len(missing), gone
            return added, removed

    def add_chunks(self, ids: Sequence[int], texts: Sequence[str], collection: str) -> None:
        vecs = self.embedder.embed(list(texts))
        with self._lock:
            self.index.add(ids, vecs)
            self.bm25.add(ids, texts)
            self.collection_of.update(dict.fromkeys(ids, collection))
            self.index.save(self.index_dir)
            self.bm25.save(self.index_dir)

    def remove_chunks(self, ids: Sequence[int]) -> None:
        with self._lock:
            self.index.remove(ids)
            self.bm25.remove(ids)
            for i in ids:
                self.collection_of.pop(i, None)
            self.index.save(self.index_dir)
            self.bm25.save(self.index_dir)

    def retrieve(
        self, query: str, k: int, collections: frozenset[str] | None = None
    ) -> tuple[list[RetrievedChunk], float]:
        """Top-k chunks for ``query`` within ``collections`` (None: all), and the time it took
        in milliseconds."""
        start = time.perf_counter()
        allowed = None
        if collections is not None:
            where = self.collection_of

            def allowed(chunk_id: int) -> bool:
                return where.get(chunk_id) in collections

        with self._lock:
            hits = self.hybrid.search(query, k, allowed)
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
                token_count=c.token_count,
            )
            for cid, score in hits
            if cid in rows
            for c, d in [rows[cid]]
        ]
        return out, (time.perf_counter() - start) * 1000
