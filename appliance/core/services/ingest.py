"""Ingestion: files to parsed sections, chunks, DB rows and vectors, one file at a time.

Each file either fully lands (document, chunks and vectors) or leaves nothing behind, and one
bad file never stops the rest of a batch: its error is reported per file. A file is stored
under a safe name (``appliance.core.names.stored_filename``: base name, no control
characters, at most 255 characters) and, where that differs, the name it came with; the
collection must be a valid name (``collection_name``). Images and PDF pages without a text
layer are read by OCR (``ocr``, from ``rag.ocr*`` in the config) here, in the ingestion
worker, one log line per page; each chunk keeps the OCR confidence of its page.
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
from appliance.core.services.knowledge import KnowledgeBase, embedding_text
from rag.chunking import TokenCounter, chunk_sections
from rag.ocr import OcrSettings
from rag.parsers import SUPPORTED_SUFFIXES, ParseError, parse_file

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IngestResult:
    name: str
    status: str  # indexed | updated | duplicate | error
    document_id: int | None = None
    chunks: int = 0
    error: str = ""
    notes: tuple[str, ...] = ()  # a file read in part: e.g. an OCR page skipped (over time)


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
    ) -> None:
        self.db = db
        self.knowledge = knowledge
        self.count_tokens = count_tokens
        self.chunk_tokens = chunk_tokens
        self.overlap_tokens = overlap_tokens
        self.max_bytes = max_bytes
        self.ocr = ocr  # None: OCR is off (images and scanned pages are refused)

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
        started = time.perf_counter()
        given = "/".join([*folders, name])
        name = stored_path([*folders, name]) if folders else stored_filename(name)
        try:
            collection = collection_name(collection)
        except InvalidName as exc:
            result = IngestResult(name, "error", error=str(exc))
        else:
            result = self._ingest_bytes(name, given, data, collection, actor)
        with self.db.session() as s:
            s.add(
                IngestionRun(
                    actor=actor[:64],
                    filename=name[:300],
                    collection=collection[:64],
                    status=RUN_STATUS.get(result.status, result.status)[:16],
                    document_id=result.document_id,
                    chunks=result.chunks,
                    size_bytes=len(data),
                    duration_ms=(time.perf_counter() - started) * 1000,
                    error=result.error or None,
                )
            )
        return result

    def _ingest_bytes(
        self, name: str, given: str, data: bytes, collection: str, actor: str
    ) -> IngestResult:
        if len(data) > self.max_bytes:
            mb = self.max_bytes // (1024 * 1024)
            return IngestResult(name, "error", error=f"file is larger than the {mb} MB limit")
        try:
            parsed = parse_file(
                name, data, ocr=self.ocr, progress=lambda line: log.info("%s: %s", name, line)
            )
        except ParseError as exc:
            return IngestResult(name, "error", error=str(exc))
        digest = hashlib.sha256(data).hexdigest()
        drafts = chunk_sections(
            parsed.sections, self.count_tokens, self.chunk_tokens, self.overlap_tokens
        )
        if not drafts:
            return IngestResult(name, "error", error="no text found in the file")
        with self.db.session() as s:
            existing = s.scalar(
                select(Document).where(Document.collection == collection, Document.sha256 == digest)
            )
            if existing is not None:
                return IngestResult(name, "duplicate", document_id=existing.id)
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
                original_name=given_filename(given) if given != name else None,
                mime=parsed.mime,
                sha256=digest,
                size_bytes=len(data),
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
            self.delete_document(old, actor=actor)
        status = "updated" if previous else "indexed"
        for note in parsed.notes:
            log.warning("%s: %s", name, note)
        return IngestResult(name, status, document_id=doc_id, chunks=len(ids), notes=parsed.notes)

    def delete_document(self, document_id: int, actor: str = "system") -> bool:
        """Remove a document, its chunks and their index entries; False if there was none."""
        with self.db.session() as s:
            doc = s.get(Document, document_id)
            if doc is None:
                return False
            chunk_ids = [c.id for c in doc.chunks]
            s.delete(doc)
            s.add(
                AuditEvent(actor=actor, action="document.delete", detail={"name": doc.source_path})
            )
        # committed: now the indexes (reconcile() finishes this if the process dies here)
        self.knowledge.remove_chunks(chunk_ids)
        return True

    def ingest_paths(
        self,
        paths: Iterable[Path],
        collection: str = "default",
        actor: str = "system",
        progress: Callable[[IngestResult], None] | None = None,
        root: Path | None = None,
    ) -> list[IngestResult]:
        """Ingest files; each is named by its path below ``root`` (the folder they were
        found in), else by its own name."""
        results = []
        for path in paths:
            folders = _folders_below(path, root)
            try:
                data = path.read_bytes()
            except OSError as exc:
                result = IngestResult(path.name, "error", error=f"cannot read: {exc.strerror}")
            else:
                result = self.ingest_bytes(path.name, data, collection, actor, folders)
            results.append(result)
            if progress:
                progress(result)
        return results

    def ingest_folder(self, folder: Path, **kwargs) -> list[IngestResult]:  # noqa: ANN003
        """Every supported file below ``folder``, each named by its path below it."""
        return self.ingest_paths(files_in(folder), root=folder, **kwargs)

    def document_count(self) -> int:
        with self.db.session() as s:
            return s.scalar(select(func.count(Document.id))) or 0
