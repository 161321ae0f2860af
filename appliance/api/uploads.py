"""``POST /api/admin/documents``: document uploads, read as they stream in.

(No ``from __future__ import annotations``: FastAPI must see the real dependency types.)

The admin check runs before the body is read (the route declares no body parameter, so FastAPI
reads nothing before its dependencies; ``appliance.wiring.body_guard`` refuses an unsigned or
oversized request before that). Each file keeps at most the per-file limit + 1 byte, so a
file over it is refused by name while the rest of the batch lands.
"""

from dataclasses import asdict

from fastapi import APIRouter, HTTPException, Request
from starlette.concurrency import run_in_threadpool

from appliance.api.bearer import PrincipalParam
from appliance.api.errors import refused
from appliance.api.multipart import MultipartError, read_form
from appliance.core.services.admin import AdminError, Upload
from appliance.core.services.admin.documents import AdminDocuments


def upload_route(
    router: APIRouter, docs: AdminDocuments, Admin: PrincipalParam, max_upload_bytes: int
) -> None:
    """Add the upload route: multipart ``files`` (one or more) and ``collection``."""

    @router.post(
        "/documents",
        openapi_extra={
            "requestBody": {
                "content": {
                    "multipart/form-data": {
                        "schema": {
                            "type": "object",
                            "required": ["files"],
                            "properties": {
                                "files": {
                                    "type": "array",
                                    "items": {"type": "string", "format": "binary"},
                                },
                                "collection": {"type": "string", "default": "default"},
                            },
                        }
                    }
                },
                "required": True,
            }
        },
    )
    async def upload(request: Request, who: Admin) -> list[dict]:
        try:
            form = await read_form(request, max_upload_bytes)
        except MultipartError as exc:
            raise HTTPException(400, str(exc)) from exc
        files = [f for f in form.files if f.field == "files"]
        if not files:
            raise HTTPException(400, "no files: send one or more as multipart field 'files'")
        uploads = [Upload(f.filename or "upload", bytes(f.data)) for f in files]
        collection = form.fields.get("collection", "default")

        def ingest() -> list[dict]:
            with refused(AdminError):
                return [asdict(r) for r in docs.upload(uploads, collection, who.username)]

        return await run_in_threadpool(ingest)
