"""Ingestion: files to parsed sections, chunks, DB rows and vectors, one file at a time.

Each file either fully lands (document, chunks and vectors) or leaves nothing behind, and one
bad file never stops the rest of a batch: its error is reported per file. A file is stored
under a safe name (``appliance.core.names.stored_filename``: base name, no control
characters, at most 255 characters) and, where that differs, the name it came with; the
collection must be a valid name (``collection_name``). Images and PDF pages without a text
layer are read by OCR (``ocr``, from ``rag.ocr*`` in the config) here, in the ingestion
worker, one log line per page; each chunk keeps the OCR confidence of its page.

What is indexed is what a reader reads: lines repeated across most of the collection's
documents (site chrome, ``rag.boilerplate``) are dropped before chunking. A batch (a folder,
``ingest_paths``) is parsed whole first and counted together, so its chunks do not depend on
the order of its files; a single upload is judged with the collection's stored counts
(``rag.block_store``) and itself, and blocks it makes repeated are swept out of the chunks of
the documents already stored. Chunks are sized in characters per language and small ones
merged (``rag.chunking.chunk_document``); the engine's tokenizer only counts their tokens.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import func, select

from appliance.core.db.models import AuditEvent, Chunk, Document, IngestionRun
from appliance.core.db.session import Database
from appliance.core.names import (
    InvalidName,
    collection_name,
    given_filename,
    stored_filename,
    stored_path,
)
from appliance.core.services.ingest_sweep import sweep_blocks
from appliance.core.services.knowledge import KnowledgeBase, embedding_text
from rag.block_store import BlockStore
from rag.boilerplate import (
    RepeatRule,
    document_blocks,
    repeated_blocks,
    strip_blocks,
)
from rag.chunk_budget import ChunkBudget
from rag.chunking import TokenCounter, chunk_document
from rag.ocr import OcrSettings
from rag.parsers import SUPPORTED_SUFFIXES, ParseError, parse_file
from rag.types import ParsedDocument

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IngestResult:
    name: str
    status: str  # indexed | updated | duplicate | error
    document_id: int | None = None
    chunks: int = 0
    error: str = ""
    notes: tuple[str, ...] = ()  # a file read in part: e.g. an OCR page skipped (over time)


@dataclass
class _File:
    """One file of a batch between its parse and its storing."""

    name: str  # as stored
    given: str  # as it came
    size: int
    collection: str = ""
    digest: str = ""
    parsed: ParsedDocument | None = None
    result: IngestResult | None = None  # decided before storing (an error, a duplicate)
    seconds: float = 0.0


# IngestResult.status -> IngestionRun.status
RUN_STATUS = {
    "indexed": "indexed",
    "updated": "updated",
    "duplicate": "unchanged",
    "error": "failed",
}


def files_in(folder: Path) -> list[Path]:
    """The files under ``folder`` with a supported type, in a stable order."""
    return sorted(
        p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in SUPPORTED_SUFFIXES
    )


def _folders_below(path: Path, root: Path | None) -> tuple[str, ...]:
    """The folders between ``root`` and ``path`` (none when it is not below ``root``)."""
    if root is None:
        return ()
    try:
        return path.parent.relative_to(root).parts
    except ValueError:
        return ()


class IngestService:
    def __init__(
        self,
        db: Database,
        knowledge: KnowledgeBase,
        count_tokens: TokenCounter,
        chunk_tokens: int,
        overlap_tokens: int,
        max_bytes: int,
        ocr: OcrSettings | None = None,
        budget: ChunkBudget | None = None,
        repeats: RepeatRule | None = None,
    ) -> None:
        """``chunk_tokens`` and ``overlap_tokens`` no longer size chunks (``budget`` does, in
        characters per language; None: ``ChunkBudget()``); they are kept for old callers."""
        self.db = db
        self.knowledge = knowledge
        self.count_tokens = count_tokens
        self.chunk_tokens = chunk_tokens
        self.overlap_tokens = overlap_tokens
        self.max_bytes = max_bytes
        self.ocr = ocr  # None: OCR is off (images and scanned pages are refused)
        self.budget = budget or ChunkBudget()
        self.repeats = repeats or RepeatRule()
        self.blocks = BlockStore.beside(knowledge.index_dir)

    def ingest_bytes(
        self,
        name: str,
        data: bytes,
        collection: str = "default",
        actor: str = "system",
        folders: Sequence[str] = (),
    ) -> IngestResult:
        """Ingest one file; every attempt is recorded as an ``IngestionRun`` row. ``name`` is
        the name the file came with, ``folders`` the folders it sits in below an ingested
        folder; the result and the row carry the name it is stored as, which is the
        document's identity in its collection (the same name again is a new version)."""
        return self._ingest_batch([self._read(name, data, collection, folders)], actor)[0]

    def _read(
        self,
        name: str,
        data: bytes | None,
        collection: str,
        folders: Sequence[str],
        error: str = "",
    ) -> _File:
        """Check and parse one file (``data`` None: it could not be read, ``error`` says why)."""
        started = time.perf_counter()
        given = "/".join([*folders, name])
        name = stored_path([*folders, name]) if folders else stored_filename(name)
        f = _File(name, given, len(data or b""), collection)
        try:
            f.collection = collection_name(collection)
        except InvalidName as exc:
            f.result = IngestResult(name, "error", error=str(exc))
        if f.result is None and data is None:
            f.result = IngestResult(name, "error", error=error)
        if f.result is None:
            f.result, f.parsed, f.digest = self._parse(name, data or b"", f.collection)
        f.seconds = time.perf_counter() - started
        return f

    def _parse(
        self, name: str, data: bytes, collection: str
    ) -> tuple[IngestResult | None, ParsedDocument | None, str]:
        if len(data) > self.max_bytes:
            mb = self.max_bytes // (1024 * 1024)
            return (
                IngestResult(name, "error", error=f"file is larger than the {mb} MB limit"),
                None,
                "",
            )
        digest = hashlib.sha256(data).hexdigest()
        with self.db.session() as s:
            existing = s.scalar(
                select(Document.id).where(
                    Document.collection == collection, Document.sha256 == digest
                )
            )
        if existing is not None:
            return IngestResult(name, "duplicate", document_id=existing), None, digest
        try:
            parsed = parse_file(
                name, data, ocr=self.ocr, progress=lambda line: log.info("%s: %s", name, line)
            )
        except ParseError as exc:
            return IngestResult(name, "error", error=str(exc)), None, digest
        return None, parsed, digest

    def _ingest_batch(
        self,
        files: Sequence[_File],
        actor: str,
        progress: Callable[[IngestResult], None] | None = None,
    ) -> list[IngestResult]:
        """Store parsed files: the repeated blocks of each collection are judged with every
        file of the batch counted, then each file is chunked and stored in turn."""
        collections = {f.collection for f in files if f.parsed is not None}
        before, repeated = {}, {}
        for c in collections:
            docs = self._stored_blocks(c)
            before[c] = repeated_blocks(docs, self.repeats)
            docs.update(
                {
                    f.name: document_blocks(f.parsed.sections)
                    for f in files
                    if f.parsed and f.collection == c
                }
            )
            repeated[c] = repeated_blocks(docs, self.repeats)
        results = []
        for f in files:
            started = time.perf_counter()
            if f.result is None and f.parsed is not None:
                f.result = self._store(f, actor, repeated[f.collection])
                if f.result.status in ("indexed", "updated"):
                    self.blocks.put(f.collection, f.name, document_blocks(f.parsed.sections))
            result = f.result or IngestResult(f.name, "error", error="not read")
            self._record(f, result, actor, f.seconds + time.perf_counter() - started)
            results.append(result)
            if progress:
                progress(result)
        for c in collections:
            newly = repeated[c] - before[c]
            if newly:
                keep = {f.name for f in files if f.collection == c}
                sweep_blocks(
                    self.db, self.knowledge, self.blocks, self.count_tokens, c, newly, keep
                )
        if collections:
            self.blocks.save()
        return results

    def _stored_blocks(self, collection: str) -> dict[str, frozenset[str]]:
        """The block keys of the collection's stored documents (entries of documents no longer
        in it, moved or deleted, are left out)."""
        with self.db.session() as s:
            names = set(
                s.scalars(select(Document.source_path).where(Document.collection == collection))
            )
        return {n: k for n, k in self.blocks.collection(collection).items() if n in names}

    def _record(self, f: _File, result: IngestResult, actor: str, seconds: float) -> None:
        with self.db.session() as s:
            s.add(
                IngestionRun(
                    actor=actor[:64],
                    filename=f.name[:300],
                    collection=f.collection[:64],
                    status=RUN_STATUS.get(result.status, result.status)[:16],
                    document_id=result.document_id,
                    chunks=result.chunks,
                    size_bytes=f.size,
                    duration_ms=seconds * 1000,
                    error=result.error or None,
                )
            )

    def _store(self, f: _File, actor: str, repeated: frozenset[str]) -> IngestResult:
        name, collection, parsed = f.name, f.collection, f.parsed
        assert parsed is not None
        drafts = chunk_document(
            strip_blocks(parsed.sections, repeated), self.count_tokens, self.budget
        )
        if not drafts:
            return IngestResult(name, "error", error="no text found in the file")
        with self.db.session() as s:
            # the same content stored since this batch was read (twice in one batch)
            existing = s.scalar(
                select(Document.id).where(
                    Document.collection == collection, Document.sha256 == f.digest
                )
            )
            if existing is not None:
                return IngestResult(name, "duplicate", document_id=existing)
            # a new version of a document already here: it replaces the old one once indexed
            previous = s.scalars(
                select(Document.id).where(
                    Document.collection == collection, Document.source_path == name
                )
            ).all()
            doc = Document(
                collection=collection,
                title=parsed.title,
                source_path=name,
                original_name=given_filename(f.given) if f.given != name else None,
                mime=parsed.mime,
                sha256=f.digest,
                size_bytes=f.size,
            )
            doc.chunks = [
                Chunk(
                    ordinal=d.ordinal,
                    section=d.section,
                    page=d.page,
                    text=d.text,
                    token_count=d.token_count,
                    ocr_confidence=d.ocr_confidence,
                )
                for d in drafts
            ]
            s.add(doc)
            s.add(AuditEvent(actor=actor, action="document.add", detail={"name": name}))
            s.flush()
            ids = [c.id for c in doc.chunks]
            texts = [embedding_text(doc.title, c.section, c.text) for c in doc.chunks]
            doc_id = doc.id
        # committed: now the vectors. If embedding fails the document is taken out again; if
        # the process dies here, KnowledgeBase.reconcile() adds the vectors on the next start.
        try:
            self.knowledge.add_chunks(ids, texts, collection)
        except Exception as exc:
            with self.db.session() as s:
                s.delete(s.get(Document, doc_id))
            return IngestResult(name, "error", error=f"indexing failed: {exc}")
        for old in previous:
            self.delete_document(old, actor=actor, forget_blocks=False)
        status = "updated" if previous else "indexed"
        for note in parsed.notes:
            log.warning("%s: %s", name, note)
        return IngestResult(name, status, document_id=doc_id, chunks=len(ids), notes=parsed.notes)

    def delete_document(
        self, document_id: int, actor: str = "system", forget_blocks: bool = True
    ) -> bool:
        """Remove a document, its chunks and their index entries; False if there was none.
        ``forget_blocks``: drop its block keys too (not when a new version replaced it)."""
        with self.db.session() as s:
            doc = s.get(Document, document_id)
            if doc is None:
                return False
            chunk_ids = [c.id for c in doc.chunks]
            collection, name = doc.collection, doc.source_path
            s.delete(doc)
            s.add(
                AuditEvent(actor=actor, action="document.delete", detail={"name": doc.source_path})
            )
        # committed: now the indexes (reconcile() finishes this if the process dies here)
        self.knowledge.remove_chunks(chunk_ids)
        if forget_blocks:
            self.blocks.drop(collection, name)
            self.blocks.save()
        return True

    def ingest_paths(
        self,
        paths: Iterable[Path],
        collection: str = "default",
        actor: str = "system",
        progress: Callable[[IngestResult], None] | None = None,
        root: Path | None = None,
    ) -> list[IngestResult]:
        """Ingest files as one batch (all parsed before any is stored, so repeated blocks are
        judged with all of them); each is named by its path below ``root`` (the folder they
        were found in), else by its own name."""
        files = []
        for path in paths:
            folders = _folders_below(path, root)
            try:
                data: bytes | None = path.read_bytes()
                error = ""
            except OSError as exc:
                data, error = None, f"cannot read: {exc.strerror}"
            files.append(self._read(path.name, data, collection, folders, error))
        return self._ingest_batch(files, actor, progress)

    def ingest_folder(self, folder: Path, **kwargs) -> list[IngestResult]:  # noqa: ANN003
        """Every supported file below ``folder``, each named by its path below it."""
        return self.ingest_paths(files_in(folder), root=folder, **kwargs)

    def document_count(self) -> int:
        with self.db.session() as s:
            return s.scalar(select(func.count(Document.id))) or 0
