"""The HTTP API (FastAPI): login, conversations (list, read, rename, delete, regenerate,
continue a cut answer), feedback, API keys, streamed chat turns, and the OpenAI-compatible
``/v1`` (``openai_rag``).

(No ``from __future__ import annotations`` here: FastAPI must see the real dependency types.)

A chat turn streams Server-Sent Events: one ``data: {json}`` line per event, each with a
``type`` of ``retrieval``, ``delta``, ``done`` or ``error``, then ``data: [DONE]``.
"""

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Body, FastAPI, Header, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from appliance.api.bearer import PrincipalParam, bearer_token, principal_param, session_user
from appliance.api.errors import http_error, refused
from appliance.api.grounded import evidence_json, verification_json
from appliance.api.params import BodyId, PathId, StrictJsonRoute
from appliance.api.unstreamed import TurnJSONResponse
from appliance.api.validation_errors import install_validation_errors
from appliance.core.auth.api_keys import ApiKeyError
from appliance.core.auth.client_address import client_address
from appliance.core.auth.directory_signin import DIRECTORY_DOWN
from appliance.core.auth.service import AuthError, AuthService, PasswordThrottled
from appliance.core.auth.throttle import whole_seconds
from appliance.core.errors import ChatError
from appliance.core.services.chat import (
    ChatEvent,
    ChatService,
    DeltaEvent,
    DoneEvent,
    ErrorEvent,
    RetrievalEvent,
)
from appliance.core.services.conversations import (
    ConversationMessage,
    ConversationService,
    ConversationSummary,
)
from appliance.core.services.grounding import AnswerMode
from appliance.core.services.relay import REPETITION
from engine.base import Engine
from engine.server.sse import ClosingStreamingResponse


class LoginBody(BaseModel):
    username: str
    password: str


class ChatBody(BaseModel):
    question: str
    conversation_id: BodyId | None = None
    stream: bool = True


class RenameBody(BaseModel):
    title: str


class FeedbackBody(BaseModel):
    rating: int
    comment: str | None = None


class KeyBody(BaseModel):
    name: str


class RegenerateBody(BaseModel):
    stream: bool = True
    # this turn's answer mode (None: the appliance's); "grounded" after an extractive answer
    # is the chat's "Write an answer"
    answer_mode: AnswerMode | None = None


def event_payload(event: ChatEvent) -> dict:
    """The JSON shape of one chat event (shared by the API and tests)."""
    if isinstance(event, RetrievalEvent):
        return {
            "type": "retrieval",
            "citations": [asdict(c) for c in event.citations],
            "retrieval_ms": round(event.retrieval_ms, 2),
            "mode": event.mode,
            "evidence": evidence_json(event.evidence),
        }
    if isinstance(event, DeltaEvent):
        return {"type": "delta", "text": event.text}
    if isinstance(event, DoneEvent):
        return {
            "type": "done",
            "conversation_id": event.conversation_id,
            "message_id": event.message_id,
            "stats": {
                **asdict(event.stats),
                "retrieval_ms": round(event.retrieval_ms, 2),
                # "repetition": the appliance stopped an answer that began to repeat itself
                "finish_reason": REPETITION if event.repeated else event.stats.finish_reason,
            },
            "verification": verification_json(event.check),
        }
    assert isinstance(event, ErrorEvent)
    return {"type": "error", "kind": event.kind, "message": event.message}


def _sse(events: Iterator[ChatEvent], gone: threading.Event) -> Iterator[str]:
    """SSE lines for a turn; stops (cancelling generation) once the client has gone."""
    try:
        for event in events:
            if gone.is_set():
                return
            yield f"data: {json.dumps(event_payload(event), ensure_ascii=False)}\n\n"
    except Exception as exc:  # never cut a stream without telling the client why
        payload = {"type": "error", "kind": "internal", "message": f"internal error: {exc}"}
        yield f"data: {json.dumps(payload)}\n\n"
    finally:
        events.close()  # cancels the engine request if the turn did not finish
    yield "data: [DONE]\n\n"


def summary_json(c: ConversationSummary) -> dict:
    """One entry of ``GET /api/conversations``."""
    return {"id": c.id, "title": c.title, "updated_at": c.updated_at.isoformat()}


def message_json(m: ConversationMessage) -> dict:
    """One message of ``GET /api/conversations/{id}``: every field, by name."""
    return asdict(m)


def _answer(events: Iterator[ChatEvent]) -> tuple[dict, int]:
    """A finished turn as one JSON object: the whole answer and the other events."""
    payloads = [event_payload(e) for e in events]
    answer = "".join(p["text"] for p in payloads if p["type"] == "delta")
    result = {"answer": answer, "events": [p for p in payloads if p["type"] != "delta"]}
    return result, 200 if payloads and payloads[-1]["type"] == "done" else 502


def _turn_response(events: Iterator[ChatEvent], stream: bool) -> Response:
    """A turn as SSE (``stream``), or as one JSON object once it has finished; either way a
    client that leaves cancels generation."""
    if stream:
        gone = threading.Event()
        return ClosingStreamingResponse(_sse(events, gone), on_disconnect=gone.set)
    return TurnJSONResponse(events, _answer)


def _session_routes(
    router: APIRouter, auth: AuthService, engine: Engine, User: PrincipalParam
) -> None:
    """Health, login, one's own password change, logout and who am I."""

    @router.get("/health")
    def health() -> JSONResponse:
        ok = engine.health()
        return JSONResponse(
            {"status": "ok" if ok else "degraded", "engine": ok}, 200 if ok else 503
        )

    @router.post("/api/login")
    def login(body: LoginBody, request: Request) -> dict:
        client = client_address(request)
        result = auth.login(body.username, body.password, client)
        if result.retry_after > 0:
            wait = whole_seconds(result.retry_after)
            raise HTTPException(
                429, f"too many failed logins; try again in {wait} s", {"Retry-After": str(wait)}
            )
        if result.refused:
            down = result.refused == DIRECTORY_DOWN
            raise HTTPException(503 if down else 403, result.refused)
        if result.token is None or result.principal is None:
            raise HTTPException(401, "wrong username or password")
        who = result.principal
        return {"token": result.token, "username": who.username, "role": who.role}

    @router.post("/api/password")
    def change_password(
        user: User,
        request: Request,
        authorization: Annotated[str, Header()],
        current_password: Annotated[str, Body(embed=True)],
        new_password: Annotated[str, Body(embed=True)],
    ) -> dict:
        """Change one's own password (session token only): API keys keep working, the
        other sessions end. A wrong current password counts as a failed login."""
        client = client_address(request)
        token = bearer_token(authorization) or ""
        try:
            change = auth.change_password(token, current_password, new_password, client)
        except PasswordThrottled as exc:
            wait = whole_seconds(exc.retry_after)
            raise HTTPException(429, str(exc), {"Retry-After": str(wait)}) from exc
        except AuthError as exc:
            raise HTTPException(400, str(exc)) from exc
        return {"ok": True, "other_sessions_ended": change.sessions_ended, "api_keys_kept": True}

    @router.post("/api/logout")
    def logout(user: User, authorization: Annotated[str, Header()]) -> dict:
        auth.logout(bearer_token(authorization) or "")
        return {"ok": True}

    @router.get("/api/me")
    def me(user: User) -> dict:
        return {"username": user.username, "role": user.role}


def _conversation_routes(
    router: APIRouter, convs: ConversationService, User: PrincipalParam
) -> None:
    """The user's conversations: list, read, rename, delete, and feedback on an answer."""

    @router.get("/api/conversations")
    def conversations(user: User) -> list[dict]:
        return [summary_json(c) for c in convs.list(user)]

    @router.get("/api/conversations/{conversation_id}")
    def conversation(conversation_id: PathId, user: User) -> dict:
        try:
            messages = convs.messages(user, conversation_id)
        except ChatError as exc:
            raise http_error(exc) from exc
        return {"id": conversation_id, "messages": [message_json(m) for m in messages]}

    @router.patch("/api/conversations/{conversation_id}")
    def rename(conversation_id: PathId, body: RenameBody, user: User) -> dict:
        try:
            title = convs.rename(user, conversation_id, body.title)
        except ChatError as exc:
            raise http_error(exc) from exc
        return {"id": conversation_id, "title": title}

    @router.delete("/api/conversations/{conversation_id}")
    def delete(conversation_id: PathId, user: User) -> dict:
        try:
            convs.delete(user, conversation_id)
        except ChatError as exc:
            raise http_error(exc) from exc
        return {"ok": True}

    @router.post("/api/messages/{message_id}/feedback")
    def feedback(message_id: PathId, body: FeedbackBody, user: User) -> dict:
        try:
            convs.feedback(user, message_id, body.rating, body.comment)
        except ChatError as exc:
            raise http_error(exc) from exc
        return {"ok": True}


def _turn(start: Callable[[], Iterator[ChatEvent]], stream: bool) -> Response:
    """Start a turn (a refusal is its HTTP error, before anything is sent) and answer it."""
    try:
        events = start()
    except ChatError as exc:
        raise http_error(exc) from exc
    return _turn_response(events, stream)


def _turn_routes(router: APIRouter, convs: ConversationService, User: PrincipalParam) -> None:
    """Chat turns: ask, answer the last question again, and continue a cut answer; SSE or one
    JSON object."""

    @router.post("/api/chat", response_model=None)
    def ask(body: ChatBody, user: User) -> Response:
        return _turn(lambda: convs.ask(user, body.question, body.conversation_id), body.stream)

    @router.post("/api/conversations/{conversation_id}/regenerate", response_model=None)
    def regenerate(
        conversation_id: PathId, user: User, body: RegenerateBody | None = None
    ) -> Response:
        body = body or RegenerateBody()
        return _turn(lambda: convs.regenerate(user, conversation_id, body.answer_mode), body.stream)

    @router.post("/api/conversations/{conversation_id}/continue", response_model=None)
    def continue_answer(
        conversation_id: PathId, user: User, body: RegenerateBody | None = None
    ) -> Response:
        """Go on with a last answer cut at the length limit; 400 when it was not cut."""
        stream = body.stream if body else True
        return _turn(lambda: convs.continue_answer(user, conversation_id), stream)


def _key_routes(router: APIRouter, auth: AuthService, User: PrincipalParam) -> None:
    """The user's own API keys for ``/v1``: list, create (the key is shown once), revoke."""

    @router.get("/api/keys")
    def keys(user: User) -> list[dict]:
        return [asdict(k) for k in auth.api_keys.list(user)]

    @router.post("/api/keys")
    def create_key(body: KeyBody, user: User) -> dict:
        with refused(ApiKeyError, kind="invalid"):
            key, info = auth.api_keys.create(user, body.name)
        return {"key": key, **asdict(info)}

    @router.delete("/api/keys/{key_id}")
    def revoke_key(key_id: PathId, user: User) -> dict:
        with refused(ApiKeyError, kind="not_found"):
            auth.api_keys.revoke(user, key_id)
        return {"ok": True}


def build_router(auth: AuthService, engine: Engine, convs: ConversationService) -> APIRouter:
    """The ``/health`` and ``/api/*`` routes; every ``/api`` route but login takes a session
    token (``Authorization: Bearer ...``). JSON bodies are strict (``StrictJsonRoute``)."""
    router = APIRouter(route_class=StrictJsonRoute)
    User = principal_param(session_user(auth))
    _session_routes(router, auth, engine, User)
    _conversation_routes(router, convs, User)
    _turn_routes(router, convs, User)
    _key_routes(router, auth, User)
    return router


def build_api(
    auth: AuthService,
    chat: ChatService,
    engine: Engine,
    conversations: ConversationService | None = None,
) -> FastAPI:
    """The API app: ``/api/*`` (bearer session tokens) and ``/v1/*`` (API keys)."""
    from appliance.api.openai_rag import OpenAIError, build_openai_router, openai_error_handler

    conversations = conversations or ConversationService(chat.db, chat)
    app = FastAPI(title="RAG appliance", docs_url=None, redoc_url=None)
    app.include_router(build_router(auth, engine, conversations))
    app.include_router(build_openai_router(auth, conversations, engine))
    app.add_exception_handler(OpenAIError, openai_error_handler)
    # 422 without the input echoed; OpenAI's 400 on /v1 (every router of the app)
    install_validation_errors(app)
    return app
