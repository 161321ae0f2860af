"""The admin REST API under ``/api/admin``: the console's functions for scripts.

(No ``from __future__ import annotations``: FastAPI must see the real dependency types.)

Bearer tokens as in ``appliance.api.chat`` (``POST /api/login``). The admin check is a dependency
of the router itself, so every endpoint answers 401 without a valid token and 403 for a
signed-in non-admin, before any work. A refusal answers with the status of its ``ErrorKind``
(``appliance.api.errors``) and the service's message as ``detail``; ids, query numbers and JSON
bodies are validated first (``appliance.api.params``: a 422).
"""

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import Response
from pydantic import AfterValidator, BaseModel, Field

from appliance.api.bearer import PrincipalParam, principal_param, session_admin
from appliance.api.errors import refused
from appliance.api.params import Days, Limit, Minutes, PathId, StrictJsonRoute, TopK
from appliance.api.uploads import upload_route
from appliance.core.names import collection_name
from appliance.core.services.admin import AdminConsole, AdminError
from appliance.core.services.admin.documents import AdminDocuments
from appliance.core.services.admin.planner import PlanError, plan_capacity
from appliance.core.services.admin.users import AdminUsers
from appliance.core.services.settings import SettingsError
from engine.base import EngineError

# a collection granted to a user, checked before the account is touched (``collection_name``)
Grant = Annotated[str, AfterValidator(collection_name)]


class UserBody(BaseModel):
    username: str
    password: str = ""
    role: str = "staff"
    collections: list[Grant] = []


class UserPatch(BaseModel):
    disabled: bool | None = None
    role: str | None = None
    collections: list[Grant] | None = None


class PasswordBody(BaseModel):
    password: str = ""


class KeyBody(BaseModel):
    username: str
    name: str = ""


class MoveBody(BaseModel):
    collection: str


class RenameBody(BaseModel):
    old: str
    new: str


class PlanBody(BaseModel):
    gpu: str
    gpu_count: Annotated[int, Field(ge=1, le=64)] = 1
    model: str = ""
    model_dir: str = ""
    context_length: Annotated[int, Field(ge=1, le=2**31)] = 32768
    concurrency: Annotated[int, Field(ge=1, le=1_000_000)] = 32


def _document_routes(
    router: APIRouter, docs: AdminDocuments, Admin: PrincipalParam, max_upload_bytes: int
) -> None:
    """Documents: list, upload, delete, re-index, move to another collection."""

    @router.get("/documents")
    def documents(collection: str = "") -> list[dict]:
        return docs.list_documents(collection or None)

    upload_route(router, docs, Admin, max_upload_bytes)

    @router.delete("/documents/{document_id}")
    def delete_document(document_id: PathId, who: Admin) -> dict:
        with refused(AdminError, kind="not_found"):
            docs.delete(document_id, who.username)
        return {"ok": True}

    @router.post("/documents/{document_id}/reindex")
    def reindex(document_id: PathId, who: Admin) -> dict:
        with refused(AdminError, kind="not_found"):
            return {"chunks": docs.reindex(document_id, who.username)}

    @router.post("/documents/{document_id}/move")
    def move(document_id: PathId, body: MoveBody, who: Admin) -> dict:
        with refused(AdminError):
            docs.move(document_id, body.collection, who.username)
        return {"ok": True}


def _collection_routes(router: APIRouter, docs: AdminDocuments, Admin: PrincipalParam) -> None:
    """Collections (list, rename, delete), chunk search and the ingestion history."""

    @router.get("/collections")
    def collections() -> list[dict]:
        return docs.collections()

    @router.post("/collections/rename")
    def rename(body: RenameBody, who: Admin) -> dict:
        with refused(AdminError):
            return {"documents": docs.rename_collection(body.old, body.new, who.username)}

    # ``:path``: a name from before names were checked may hold a slash (``../x``, sent as
    # ``..%2Fx``); it must still be deletable
    @router.delete("/collections/{name:path}")
    def delete_collection(name: str, who: Admin) -> dict:
        with refused(AdminError):
            return {"documents": docs.delete_collection(name, who.username)}

    @router.get("/chunks")
    def search(q: str, k: TopK = 10, collection: str = "") -> list[dict]:
        with refused(AdminError):
            return docs.search_chunks(q, k, collection or None)

    @router.get("/ingestion-runs")
    def ingestion_runs(limit: Limit = 200) -> list[dict]:
        return docs.ingestion_history(limit)


def _user_routes(router: APIRouter, users: AdminUsers, Admin: PrincipalParam) -> None:
    """Users (list, create, change, reset a password) and their API keys."""

    @router.get("/users")
    def list_users() -> list[dict]:
        return users.list_users()

    @router.post("/users")
    def create_user(body: UserBody, who: Admin) -> dict:
        with refused(AdminError):
            password = users.create(
                who.username, body.username, body.password, body.role, body.collections
            )
        return {"username": body.username.strip(), "password": password}

    @router.patch("/users/{username}")
    def patch_user(username: str, body: UserPatch, who: Admin) -> dict:
        with refused(AdminError):
            if body.disabled is not None:
                users.set_disabled(who.username, username, body.disabled)
            if body.role is not None:
                users.set_role(who.username, username, body.role)
            if body.collections is not None:
                users.set_collections(who.username, username, body.collections)
        return {"ok": True}

    @router.post("/users/{username}/password")
    def reset_password(username: str, body: PasswordBody, who: Admin) -> dict:
        with refused(AdminError):
            reset = users.reset_password(who.username, username, body.password)
        return {
            "password": reset.password,
            "sessions_ended": reset.sessions_ended,
            "api_keys_revoked": reset.api_keys_revoked,
        }

    @router.get("/api-keys")
    def api_keys() -> list[dict]:
        return users.list_keys()

    @router.post("/api-keys")
    def create_key(body: KeyBody, who: Admin) -> dict:
        with refused(AdminError):
            return {"key": users.create_key(who.username, body.username, body.name)}

    @router.delete("/api-keys/{key_id}")
    def revoke_key(key_id: PathId, who: Admin) -> dict:
        with refused(AdminError, kind="not_found"):
            users.revoke_key(who.username, key_id)
        return {"ok": True}


def _engine_routes(router: APIRouter, console: AdminConsole, Admin: PrincipalParam) -> None:
    """The engine (status, recent series, flush its cache), the planner and the settings."""

    @router.get("/engine")
    def engine_status() -> dict:
        return console.engine.status()

    @router.get("/engine/series")
    def engine_series(minutes: Minutes = 60) -> dict:
        return {
            "engine": [{**asdict(s), "at": s.at.isoformat()} for s in console.sampler.samples()],
            "turns": [
                {**t, "time": t["time"].isoformat()} for t in console.sampler.turn_series(minutes)
            ],
        }

    @router.post("/engine/flush-cache")
    def flush_cache(who: Admin) -> dict:
        with refused(EngineError, kind="engine_error"):
            console.engine.flush_cache(who.username)
        return {"ok": True}

    @router.post("/planner")
    def planner(body: PlanBody) -> dict:
        with refused(PlanError):
            plan = plan_capacity(
                body.gpu,
                body.gpu_count,
                body.model,
                body.context_length,
                body.model_dir,
                body.concurrency,
            )
        return asdict(plan)

    @router.get("/settings")
    def get_settings() -> dict:
        return asdict(console.settings.current())

    @router.put("/settings")
    def put_settings(changes: dict[str, Any], who: Admin) -> dict:
        with refused(SettingsError):
            return asdict(console.settings.update(who.username, changes))


def _report_routes(router: APIRouter, console: AdminConsole) -> None:
    """The audit log (JSON or CSV) and the usage analytics."""

    @router.get("/audit", response_model=None)
    def audit(
        category: str = "all",
        actor: str = "",
        limit: Limit = 500,
        format: str = "json",  # noqa: A002
    ) -> Response | list[dict]:
        with refused(ValueError):
            if format == "csv":
                headers = {"Content-Disposition": 'attachment; filename="audit.csv"'}
                return Response(console.audit.csv(category, actor), 200, headers, "text/csv")
            return console.audit.query(category, actor, limit)

    @router.get("/analytics")
    def analytics(days: Days = 30) -> dict:
        return {
            "per_day": console.analytics.questions_per_day(days),
            "per_user": console.analytics.questions_per_user(days),
            "feedback": console.analytics.feedback(),
        }


def build_admin_router(console: AdminConsole, max_upload_bytes: int) -> APIRouter:
    """Every ``/api/admin`` route, behind the admin check."""
    admin = session_admin(console.auth)
    router = APIRouter(
        prefix="/api/admin", dependencies=[Depends(admin)], route_class=StrictJsonRoute
    )
    Admin = principal_param(admin)
    _document_routes(router, console.documents, Admin, max_upload_bytes)
    _collection_routes(router, console.documents, Admin)
    _user_routes(router, console.users, Admin)
    _engine_routes(router, console, Admin)
    _report_routes(router, console)
    return router
