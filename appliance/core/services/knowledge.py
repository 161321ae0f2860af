"""The knowledge base: owns the vector and BM25 indexes and the evidence pieces, keeps them
in step with the chunk table, retrieves (hybrid, fused by RRF) within the collections a caller
may read, and picks the evidence sentences of what it retrieved.

The database is the source of truth. Every change commits chunks to the DB first and then
updates and atomically saves the indexes; on start ``reconcile`` adds chunks an index lacks
and drops entries whose chunks are gone, so a crash between the two steps heals itself. The
same repair fills in the pieces of chunks indexed before pieces existed (an upgrade).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from sqlalchemy import select

from appliance.core.db.models import Chunk, Document
from appliance.core.db.session import Database
from appliance.core.services.neighbours import neighbour_pieces, with_neighbours
from rag.answer_cues import question_cues
from rag.bm25 import BM25Index
from rag.dedupe import collapse
from rag.embeddings import Embedder
from rag.evidence import EvidenceCandidate, EvidenceSpan, rank_evidence
from rag.hybrid import HybridRetriever
from rag.index import VectorIndex
from rag.index_embedder import check_embedder
from rag.piece_store import PieceStore
from rag.piece_vectors import build_pieces
from rag.prompt import chunk_header
from rag.types import RetrievedChunk

log = logging.getLogger(__name__)


def embedding_text(title: str, section: str, text: str) -> str:
    return f"{chunk_header(title, section, None)}\n{text}"


def _text_of(row) -> str:  # noqa: ANN001 - a row of ``KnowledgeBase._rows``
    return embedding_text(row.title, row.section, row.text)


# chunks embedded per step when filling in or recomputing pieces (one progress report each)
FILL_BATCH = 64
Progress = Callable[[int, int], None]  # (chunks done, chunks in all)


class KnowledgeBase:
    # chunks after a retrieved one in its section that it is read on into (``rag.neighbours``;
    # ``rag.neighbour_chunks``, set by ``use_neighbours``); 0: each chunk as stored
    neighbour_chunks: int = 0

    def __init__(
        self, db: Database, embedder: Embedder, index_dir: Path, rebuild: bool = False
    ) -> None:
        """Open the index in ``index_dir`` for ``embedder``. An index of another embedder is
        refused (``rag.index_embedder.EmbedderMismatch``) unless ``rebuild``: then it is
        dropped, to be filled by ``reindex``; the database's chunks are never touched."""
        if not rebuild:
            check_embedder(index_dir, embedder.name, embedder.dim)
        self.db = db
        self.embedder = embedder
        self.index_dir = index_dir
        self._lock = threading.RLock()
        loaded = VectorIndex.load(index_dir, embedder.dim, embedder.name)
        self.index = loaded or VectorIndex(embedder.dim, embedder.name)
        self.bm25 = BM25Index.load(index_dir) or BM25Index()
        self.pieces = PieceStore.load(index_dir, embedder.dim, embedder.name) or PieceStore(
            embedder.dim, embedder.name
        )
        self.collection_of: dict[int, str] = {}  # chunk id -> collection, for access checks
        self.hybrid = HybridRetriever(self.index, self.bm25, embed=self.embedder.embed)

    def _rows(self, ids: Sequence[int] | None = None) -> list:  # noqa: ANN401 - SQLAlchemy rows
        """(id, section, text, title, collection) of the given chunks (None: all), by id."""
        query = select(
            Chunk.id, Chunk.section, Chunk.text, Document.title, Document.collection
        ).join(Document)
        if ids is not None:
            query = query.where(Chunk.id.in_(list(ids)))
        with self.db.session() as s:
            return list(s.execute(query.order_by(Chunk.id)).all())

    def reconcile(self, progress: Progress | None = None) -> tuple[int, int]:
        """Make the indexes and the piece store hold exactly the DB's chunks; return (added,
        removed) vectors. Chunks without pieces (an index from before pieces) get them, with
        their progress logged."""
        with self._lock:
            rows = self._rows()
            self.collection_of = {r.id: r.collection for r in rows}
            in_db = set(self.collection_of)
            have_vec, have_bm25, have_pieces = (
                self.index.ids(),
                self.bm25.ids(),
                self.pieces.ids(),
            )
            removed = self.index.remove(sorted(have_vec - in_db))
            changed_bm25 = bool(self.bm25.remove(sorted(have_bm25 - in_db)))
            changed_pieces = bool(self.pieces.remove(sorted(have_pieces - in_db)))
            missing_bm25 = [r for r in rows if r.id not in have_bm25]
            if missing_bm25:
                self.bm25.add([r.id for r in missing_bm25], [_text_of(r) for r in missing_bm25])
            todo = [r for r in rows if r.id not in have_vec or r.id not in have_pieces]
            if todo and have_pieces != in_db:
                log.info("computing evidence pieces for %d chunks", len(todo))
            added = self._fill(todo, replace_vectors=in_db - have_vec, progress=progress)
            if removed or added:
                self.index.save(self.index_dir)
            if changed_bm25 or missing_bm25:
                self.bm25.save(self.index_dir)
            if changed_pieces or todo:
                self.pieces.save(self.index_dir)
            return added, removed

    def _fill(self, rows: Sequence, replace_vectors: set[int], progress: Progress | None) -> int:
        """Embed ``rows`` in batches: store every row's pieces, and the chunk vector of those
        in ``replace_vectors``; returns how many vectors were added."""
        added = 0
        for at in range(0, len(rows), FILL_BATCH):
            batch = rows[at : at + FILL_BATCH]
            vecs, pieces = build_pieces(
                self.embedder,
                [_text_of(r) for r in batch],
                [r.text for r in batch],
                self.bm25.tokenizer,
            )
            self.pieces.add([r.id for r in batch], pieces)
            keep = [n for n, r in enumerate(batch) if r.id in replace_vectors]
            if keep:
                self.index.add([batch[n].id for n in keep], vecs[keep])
                added += len(keep)
            done = min(at + FILL_BATCH, len(rows))
            if progress:
                progress(done, len(rows))
            elif len(rows) > FILL_BATCH:
                log.info("evidence pieces: %d of %d chunks", done, len(rows))
        return added

    def reindex(self, progress: Progress | None = None) -> int:
        """Recompute every chunk's vector, BM25 tokens and pieces; returns the chunk count."""
        with self._lock:
            rows = self._rows()
            self.index.remove(sorted(self.index.ids()))
            self.bm25.remove(sorted(self.bm25.ids()))
            self.pieces.remove(sorted(self.pieces.ids()))
            self.collection_of = {r.id: r.collection for r in rows}
            if rows:
                self.bm25.add([r.id for r in rows], [_text_of(r) for r in rows])
            self._fill(rows, replace_vectors={r.id for r in rows}, progress=progress)
            self.index.save(self.index_dir)
            self.bm25.save(self.index_dir)
            self.pieces.save(self.index_dir)
            return len(rows)

    def add_chunks(
        self,
        ids: Sequence[int],
        texts: Sequence[str],
        collection: str,
        chunk_texts: Sequence[str] | None = None,
    ) -> None:
        """Index committed chunks: ``texts`` are their ``embedding_text``s, ``chunk_texts``
        their own texts (None: read from the database), which the pieces' offsets refer to."""
        if chunk_texts is None:
            by_id = {r.id: r.text for r in self._rows(ids)}
            if len(by_id) != len(set(ids)):
                raise ValueError("add_chunks: chunks must be committed to the database first")
            chunk_texts = [by_id[i] for i in ids]
        vecs, pieces = build_pieces(self.embedder, texts, chunk_texts, self.bm25.tokenizer)
        with self._lock:
            self.index.add(ids, vecs)
            self.bm25.add(ids, texts)
            self.pieces.add(ids, pieces)
            self.collection_of.update(dict.fromkeys(ids, collection))
            self.index.save(self.index_dir)
            self.bm25.save(self.index_dir)
            self.pieces.save(self.index_dir)

    def remove_chunks(self, ids: Sequence[int]) -> None:
        with self._lock:
            self.index.remove(ids)
            self.bm25.remove(ids)
            self.pieces.remove(ids)
            for i in ids:
                self.collection_of.pop(i, None)
            self.index.save(self.index_dir)
            self.bm25.save(self.index_dir)
            self.pieces.save(self.index_dir)

    def evidence(
        self, question: str, chunks: Sequence[RetrievedChunk], k: int = 2
    ) -> list[EvidenceSpan]:
        """The ``k`` pieces of ``chunks`` that best answer ``question``, best first, verbatim,
        with offsets into each chunk's text. Reads only the chunks given; a chunk without
        stored pieces (not reconciled yet) is skipped; a chunk shown read on into its
        neighbours (``use_neighbours``) is read with their pieces too. The question's vector is
        the one retrieval just computed (the retriever remembers recent queries)."""
        if k <= 0 or not chunks or not question.strip():
            return []
        vector = self.hybrid.query_vector(question)
        tokenize = self.bm25.tokenizer.tokenize
        pieces = neighbour_pieces(self.db, chunks, self.neighbour_chunks, self.pieces.get)
        candidates = [
            EvidenceCandidate(c.chunk_id, c.text, p, tuple(tokenize(f"{c.title}\n{c.section}")))
            for c in chunks
            if (p := pieces.get(c.chunk_id)) is not None
        ]
        return rank_evidence(
            vector, tokenize(question), candidates, k, cues=question_cues(question)
        )

    def readable(self, collections: frozenset[str] | None) -> Callable[[int], bool]:
        """Whether a reader of ``collections`` (None: all) may read a chunk now, by its id: not
        when the index holds it in another collection (access revoked, or the document moved
        away). A chunk the index no longer holds (its document deleted) is no access matter:
        it is readable, as its text was when it was shown."""
        if collections is None:
            return lambda _chunk_id: True

        def readable(chunk_id: int) -> bool:
            held = self.collection_of.get(chunk_id)
            return held is None or held in collections

        return readable

    def retrieve(
        self, query: str, k: int, collections: frozenset[str] | None = None
    ) -> tuple[list[RetrievedChunk], float]:
        """Top-k chunks for ``query`` within ``collections`` (None: all), and the time it took
        in milliseconds. Near-duplicate chunks (the same text in two documents) are collapsed
        to the best-ranked one (``rag.dedupe``), and the next hits take the freed places. Each
        chunk is then read on into its neighbours (``use_neighbours``)."""
        start = time.perf_counter()
        allowed = None
        if collections is not None:
            where = self.collection_of

            def allowed(chunk_id: int) -> bool:
                return where.get(chunk_id) in collections

        with self._lock:
            hits = self.hybrid.search(query, k, allowed)
        out = self._chunks(hits)
        kept = collapse(out, lambda c: c.text)
        if len(kept) < len(out):  # near duplicates collapsed: fill the freed places
            with self._lock:
                hits = self.hybrid.search(query, 2 * k, allowed)
            kept = collapse(self._chunks(hits), lambda c: c.text)[:k]
        kept = with_neighbours(self.db, kept, self.neighbour_chunks)
        return kept, (time.perf_counter() - start) * 1000

    def use_neighbours(self, n: int) -> None:
        """Read each retrieved chunk on into up to ``n`` chunks after it in its section, in
        the prompt, the citation and the evidence (``rag.neighbours``); 0: as stored."""
        if n < 0:
            raise ValueError(f"neighbour chunks must be >= 0, got {n}")
        self.neighbour_chunks = n

    def _chunks(self, hits: Sequence[tuple[int, float]]) -> list[RetrievedChunk]:
        """The retrieved chunks of ``hits`` (chunk id, score), in order; gone ones skipped."""
        if not hits:
            return []
        with self.db.session() as s:
            rows = {
                c.id: (c, d)
                for c, d in s.execute(
                    select(Chunk, Document).join(Document).where(Chunk.id.in_([i for i, _ in hits]))
                ).all()
            }
        return [
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
                ocr_confidence=c.ocr_confidence,
            )
            for cid, score in hits
            if cid in rows
            for c, d in [rows[cid]]
        ]
