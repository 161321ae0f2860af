"""Documents for the admin console: upload, list, delete, re-index, collections, chunk search
and the ingestion history. Ingestion itself is ``IngestService``; this only adds admin views
and audited admin actions on top of it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sqlalchemy import func, select, update

from appliance.core.db.models import AuditEvent, Chunk, Document, IngestionRun, UserCollection
from appliance.core.names import InvalidName, collection_name, existing_collection
from appliance.core.services.ingest import IngestResult, IngestService
from appliance.core.services.knowledge import KnowledgeBase, embedding_text


class AdminError(ValueError):
    """An admin request that cannot be done; the message says why."""


@dataclass(frozen=True)
class Upload:
    """One file as uploaded (name as the user's browser gave it)."""

    name: str
    data: bytes


def check_collection(name: str) -> str:
    """A collection name to store something under, normalised (``collection_name``); raises
    ``AdminError`` when it breaks the rules."""
    try:
        return collection_name(name)
    except InvalidName as exc:
        raise AdminError(str(exc)) from exc


def known_collection(name: str) -> str:
    """A collection name to look up (rename from, delete): looser than ``check_collection``,
    so a collection named before the rules can still be renamed or deleted."""
    try:
        return existing_collection(name)
    except InvalidName as exc:
        raise AdminError(str(exc)) from exc


class AdminDocuments:
    def __init__(self, ingest: IngestService, knowledge: KnowledgeBase) -> None:
        self.ingest = ingest
        self.knowledge = knowledge
        self.db = ingest.db

    # ---- documents ------------------------------------------------------------------------

    def upload(
        self,
        files: Iterable[Upload],
        collection: str,
        actor: str,
        progress: Callable[[int, IngestResult], None] | None = None,
    ) -> list[IngestResult]:
        """Ingest each file in turn; a bad file gets its own error and the rest still land.
        ``progress(i, result)`` is called after file ``i`` (0-based)."""
        collection = check_collection(collection)
        results = []
        for i, f in enumerate(files):
            result = self.ingest.ingest_bytes(f.name, f.data, collection, actor)
            results.append(result)
            if progress:
                progress(i, result)
        return results

    def list_documents(self, collection: str | None = None) -> list[dict]:
        with self.db.session() as s:
            query = (
                select(Document, func.count(Chunk.id))
                .outerjoin(Chunk)
                .group_by(Document.id)
                .order_by(Document.collection, Document.source_path)
            )
            if collection:
                query = query.where(Document.collection == collection)
            return [
                {
                    "id": d.id,
                    "collection": d.collection,
                    "name": d.source_path,
                    "original_name": d.original_name,  # as uploaded, where it differs
                    "title": d.title,
                    "chunks": n,
                    "size_bytes": d.size_bytes,
                    "added": d.created_at.isoformat(timespec="seconds"),
                }
                for d, n in s.execute(query).all()
            ]

    def delete(self, document_id: int, actor: str) -> None:
        if not self.ingest.delete_document(int(document_id), actor=actor):
            raise AdminError(f"no document {document_id}")

    def reindex(self, document_id: int, actor: str) -> int:
        """Re-embed a document's chunks into both indexes; returns the number of chunks."""
        with self.db.session() as s:
            doc = s.get(Document, int(document_id))
            if doc is None:
                raise AdminError(f"no document {document_id}")
            ids = [c.id for c in doc.chunks]
            texts = [embedding_text(doc.title, c.section, c.text) for c in doc.chunks]
            collection, name = doc.collection, doc.source_path
            s.add(AuditEvent(actor=actor, action="document.reindex", detail={"name": name}))
        self.knowledge.remove_chunks(ids)
        self.knowledge.add_chunks(ids, texts, collection)
        return len(ids)

    def move(self, document_id: int, collection: str, actor: str) -> None:
        """Put a document in another collection (the index's access map follows)."""
        collection = check_collection(collection)
        with self.db.session() as s:
            doc = s.get(Document, int(document_id))
            if doc is None:
                raise AdminError(f"no document {document_id}")
            clash = s.scalar(
                select(Document.id).where(
                    Document.collection == collection, Document.sha256 == doc.sha256
                )
            )
            if clash is not None and clash != doc.id:
                raise AdminError(f"{collection!r} already holds the same file")
            detail = {"name": doc.source_path, "from": doc.collection, "to": collection}
            doc.collection = collection
            s.add(AuditEvent(actor=actor, action="document.move", detail=detail))
        self.knowledge.reconcile()  # the index's access map follows the document

    # ---- collections ----------------------------------------------------------------------

    def collections(self) -> list[dict]:
        """Every collection that holds documents or is granted to a user, with counts."""
        with self.db.session() as s:
            docs = dict(
                s.execute(
                    select(Document.collection, func.count(Document.id)).group_by(
                        Document.collection
                    )
                ).all()
            )
            users = dict(
                s.execute(
                    select(UserCollection.collection, func.count(UserCollection.user_id)).group_by(
                        UserCollection.collection
                    )
                ).all()
            )
        return [
            {"collection": c, "documents": docs.get(c, 0), "users": users.get(c, 0)}
            for c in sorted(set(docs) | set(users))
        ]

    def rename_collection(self, old: str, new: str, actor: str) -> int:
        """Rename a collection in documents and user grants; returns documents moved."""
        old, new = known_collection(old), check_collection(new)
        if old == new:
            raise AdminError("the new name is the same as the old one")
        with self.db.session() as s:
            if s.scalar(select(Document.id).where(Document.collection == new).limit(1)):
                raise AdminError(f"collection {new!r} already exists; move documents one by one")
            grants = list(s.scalars(select(UserCollection).where(UserCollection.collection == old)))
            moved = s.execute(
                update(Document).where(Document.collection == old).values(collection=new)
            ).rowcount
            if not moved and not grants:
                raise AdminError(f"no collection {old!r}")
            for grant in grants:
                taken = s.get(UserCollection, (grant.user_id, new))
                s.delete(grant)
                if taken is None:
                    s.add(UserCollection(user_id=grant.user_id, collection=new))
            s.add(
                AuditEvent(actor=actor, action="collection.rename", detail={"from": old, "to": new})
            )
        self.knowledge.reconcile()  # the index's access map follows the documents
        return moved

    def delete_collection(self, name: str, actor: str) -> int:
        """Delete every document of a collection (grants stay); returns documents deleted."""
        name = known_collection(name)
        with self.db.session() as s:
            ids = list(s.scalars(select(Document.id).where(Document.collection == name)))
        if not ids:
            raise AdminError(f"collection {name!r} holds no documents")
        for doc_id in ids:
            self.ingest.delete_document(doc_id, actor=actor)
        return len(ids)

    # ---- search and history ---------------------------------------------------------------

    def search_chunks(self, query: str, k: int = 10, collection: str | None = None) -> list[dict]:
        """What chat retrieval finds for ``query`` (hybrid), across all or one collection."""
        query = (query or "").strip()
        if not query:
            raise AdminError("type something to search for")
        allowed = frozenset({collection}) if collection else None
        hits, _ms = self.knowledge.retrieve(query, max(1, min(int(k), 50)), allowed)
        return [
            {
                "score": round(h.score, 4),
                "document": h.source,
                "section": h.section,
                "page": h.page,
                "chunk_id": h.chunk_id,
                "text": h.text,
            }
            for h in hits
        ]

    def ingestion_history(self, limit: int = 200) -> list[dict]:
        with self.db.session() as s:
            rows = s.scalars(
                select(IngestionRun).order_by(IngestionRun.id.desc()).limit(max(1, int(limit)))
            ).all()
            return [
                {
                    "at": r.at.isoformat(timespec="seconds"),
                    "actor": r.actor,
                    "file": r.filename,
                    "collection": r.collection,
                    "status": r.status,
                    "chunks": r.chunks,
                    "size_bytes": r.size_bytes,
                    "ms": round(r.duration_ms, 1),
                    "error": r.error or "",
                }
                for r in rows
            ]
