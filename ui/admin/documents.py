"""Documents tab: multi-file upload with per-file progress, the document list with delete,
re-index and move, collections, chunk search and the ingestion history."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from appliance.core.auth.service import AuthService
from appliance.core.services.admin import AdminConsole, AdminError, Upload
from appliance.core.services.admin.documents import AdminDocuments
from ui.admin.common import Loader, table
from ui.session import require_admin

DOC_COLUMNS = ("id", "collection", "name", "title", "chunks", "size_bytes", "added")
PROGRESS_COLUMNS = ("file", "status", "chunks", "error")
COLLECTION_COLUMNS = ("collection", "documents", "users")
HIT_COLUMNS = ("score", "document", "section", "page", "chunk_id", "text")
RUN_COLUMNS = ("at", "actor", "file", "collection", "status", "chunks", "size_bytes", "ms", "error")


@dataclass(frozen=True)
class _UploadBox:
    files: gr.File
    collection: gr.Dropdown
    button: gr.Button
    progress: gr.Dataframe


@dataclass(frozen=True)
class _DocumentList:
    table: gr.Dataframe
    doc_id: gr.Number
    target: gr.Textbox
    delete: gr.Button
    reindex: gr.Button
    move: gr.Button
    note: gr.Markdown


@dataclass(frozen=True)
class _CollectionsBox:
    table: gr.Dataframe
    old: gr.Textbox
    new: gr.Textbox
    rename: gr.Button
    drop: gr.Button
    note: gr.Markdown


@dataclass(frozen=True)
class _ChunkSearch:
    query: gr.Textbox
    collection: gr.Textbox
    button: gr.Button
    hits: gr.Dataframe


def build_documents_tab(console: AdminConsole, auth: AuthService) -> Loader:
    docs = console.documents
    load = _loader(docs, auth)
    with gr.Tab("Documents", id="documents"):  # top to bottom, in creation order
        up = _upload_box()
        listing = _document_list()
        colls = _collections_box()
        search = _chunk_search()
        runs = gr.Dataframe(table([], RUN_COLUMNS), label="Ingestion history", elem_id="runs")
        refresh = gr.Button("Refresh", size="sm")

    outputs = [listing.table, colls.table, runs, up.collection]
    up.button.click(_uploader(docs, auth), [up.files, up.collection], up.progress).then(
        load, None, outputs
    )
    doc_buttons = (listing.delete, listing.reindex, listing.move)
    for btn, fn in zip(doc_buttons, _document_actions(docs, auth), strict=True):
        btn.click(fn, [listing.doc_id, listing.target], listing.note).success(load, None, outputs)
    for btn, fn in zip((colls.rename, colls.drop), _collection_actions(docs, auth), strict=True):
        btn.click(fn, [colls.old, colls.new], colls.note).success(load, None, outputs)
    find = _searcher(docs, auth)
    search.button.click(find, [search.query, search.collection], search.hits)
    search.query.submit(find, [search.query, search.collection], search.hits)
    refresh.click(load, None, outputs)
    return Loader(load, outputs)


def _upload_box() -> _UploadBox:
    with gr.Row():
        files = gr.File(label="Files", file_count="multiple", elem_id="upload-files")
        with gr.Column():
            collection = gr.Dropdown(
                ["default"],
                value="default",
                label="Collection",
                allow_custom_value=True,
                elem_id="upload-collection",
            )
            button = gr.Button("Upload and index", variant="primary", elem_id="upload")
    progress = gr.Dataframe(
        table([], PROGRESS_COLUMNS), label="Upload progress", elem_id="upload-progress"
    )
    return _UploadBox(files, collection, button, progress)


def _document_list() -> _DocumentList:
    documents = gr.Dataframe(table([], DOC_COLUMNS), label="Documents", elem_id="documents")
    with gr.Row():
        doc_id = gr.Number(label="Document id", precision=0)
        target = gr.Textbox(label="Move to collection")
        delete_btn = gr.Button("Delete", variant="stop")
        reindex_btn = gr.Button("Re-index")
        move_btn = gr.Button("Move")
    note = gr.Markdown()
    return _DocumentList(documents, doc_id, target, delete_btn, reindex_btn, move_btn, note)


def _collections_box() -> _CollectionsBox:
    with gr.Accordion("Collections", open=False):
        collections = gr.Dataframe(table([], COLLECTION_COLUMNS), label="Collections")
        with gr.Row():
            old = gr.Textbox(label="Collection")
            new = gr.Textbox(label="New name")
            rename_btn = gr.Button("Rename")
            drop_btn = gr.Button("Delete its documents", variant="stop")
        note = gr.Markdown()
    return _CollectionsBox(collections, old, new, rename_btn, drop_btn, note)


def _chunk_search() -> _ChunkSearch:
    with gr.Accordion("Search chunks", open=False):
        with gr.Row():
            query = gr.Textbox(label="Query", elem_id="chunk-query", scale=3)
            in_coll = gr.Textbox(label="Collection (empty: all)")
            search_btn = gr.Button("Search", elem_id="chunk-search")
        hits = gr.Dataframe(table([], HIT_COLUMNS), label="Chunks", elem_id="chunk-hits")
    return _ChunkSearch(query, in_coll, search_btn, hits)


def _loader(docs: AdminDocuments, auth: AuthService) -> Callable:
    def load(request: gr.Request):  # noqa: ANN202
        require_admin(request, auth)
        names = [c["collection"] for c in docs.collections()] or ["default"]
        return (
            table(docs.list_documents(), DOC_COLUMNS),
            table(docs.collections(), COLLECTION_COLUMNS),
            table(docs.ingestion_history(), RUN_COLUMNS),
            gr.Dropdown(choices=names),
        )

    return load


def _uploader(docs: AdminDocuments, auth: AuthService) -> Callable[..., Iterator]:
    def upload(paths: list[str] | None, collection: str, request: gr.Request) -> Iterator:
        who = require_admin(request, auth)
        if not paths:
            raise gr.Error("Choose one or more files first.")
        rows = [{"file": Path(p).name, "status": "waiting"} for p in paths]
        yield table(rows, PROGRESS_COLUMNS)
        for i, path in enumerate(paths):
            rows[i]["status"] = "indexing…"
            yield table(rows, PROGRESS_COLUMNS)
            try:
                with open(path, "rb") as f:  # one byte past the limit: refused by name
                    upload = Upload(Path(path).name, f.read(docs.ingest.max_bytes + 1))
                _discard(path)  # read: Gradio's copy is not kept (the index has the text)
                [result] = docs.upload([upload], collection, who.username)
            except AdminError as exc:
                raise gr.Error(str(exc)) from exc
            except OSError as exc:
                rows[i].update(status="error", error=f"cannot read the upload: {exc.strerror}")
                continue
            # notes: a file read in part (an OCR page skipped) says which part
            error = result.error or "; ".join(result.notes)
            rows[i].update(status=result.status, chunks=result.chunks, error=error)
            yield table(rows, PROGRESS_COLUMNS)

    return upload


def _discard(path: str) -> None:
    """Delete an upload's temporary file, and its folder when that is left empty (Gradio puts
    each upload in a folder of its own)."""
    file = Path(path)
    file.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # not empty, or already gone
        file.parent.rmdir()


def _document_actions(
    docs: AdminDocuments, auth: AuthService
) -> tuple[Callable[..., str], Callable[..., str], Callable[..., str]]:
    """The delete, re-index and move handlers."""

    def act(action: str, doc_id: float | None, target: str, request: gr.Request) -> str:
        who = require_admin(request, auth)
        if doc_id is None:
            raise gr.Error("Give a document id from the table.")
        try:
            if action == "delete":
                docs.delete(int(doc_id), who.username)
                return f"Deleted document {int(doc_id)}."
            if action == "reindex":
                n = docs.reindex(int(doc_id), who.username)
                return f"Re-indexed document {int(doc_id)} ({n} chunks)."
            docs.move(int(doc_id), target, who.username)
            return f"Moved document {int(doc_id)} to {target.strip()!r}."
        except AdminError as exc:
            raise gr.Error(str(exc)) from exc

    def delete(doc: float | None, to: str, request: gr.Request) -> str:
        return act("delete", doc, to, request)

    def reindex(doc: float | None, to: str, request: gr.Request) -> str:
        return act("reindex", doc, to, request)

    def move(doc: float | None, to: str, request: gr.Request) -> str:
        return act("move", doc, to, request)

    return delete, reindex, move


def _collection_actions(
    docs: AdminDocuments, auth: AuthService
) -> tuple[Callable[..., str], Callable[..., str]]:
    """The rename and delete-its-documents handlers."""

    def collection_act(action: str, old: str, new: str, request: gr.Request) -> str:
        who = require_admin(request, auth)
        try:
            if action == "rename":
                n = docs.rename_collection(old, new, who.username)
                return f"Renamed {old.strip()!r} to {new.strip()!r} ({n} documents)."
            n = docs.delete_collection(old, who.username)
            return f"Deleted collection {old.strip()!r} ({n} documents)."
        except AdminError as exc:
            raise gr.Error(str(exc)) from exc

    def rename(name: str, new_name: str, request: gr.Request) -> str:
        return collection_act("rename", name, new_name, request)

    def drop(name: str, new_name: str, request: gr.Request) -> str:
        return collection_act("delete", name, new_name, request)

    return rename, drop


def _searcher(docs: AdminDocuments, auth: AuthService) -> Callable:
    def search(query: str, collection: str, request: gr.Request):  # noqa: ANN202
        require_admin(request, auth)
        try:
            return table(docs.search_chunks(query, 10, collection or None), HIT_COLUMNS)
        except AdminError as exc:
            raise gr.Error(str(exc)) from exc

    return search
