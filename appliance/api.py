"""The HTTP API (FastAPI): login, conversations and streamed chat turns.

(No ``from __future__ import annotations`` here: FastAPI must see the real dependency types.)

A chat turn streams Server-Sent Events: one ``data: {json}`` line per event, each with a
``type`` of ``retrieval``, ``delta``, ``done`` or ``error``, then ``data: [DONE]``.
"""

import json
import threading
from collections.abc import Iterator
from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from appliance.auth import AuthService, Principal
from appliance.services.chat import (
    ChatError,
    ChatEvent,
    ChatService,
    DeltaEvent,
    DoneEvent,
    ErrorEvent,
    RetrievalEvent,
)
from engine.base import Engine
from engine.embedded.server.sse import ClosingStreamingResponse

_STATUS = {
    "empty": 400,
    "too_long": 413,
    "prompt_too_long": 413,
    "not_found": 404,
    "busy": 503,
    "unavailable": 503,
}


class LoginBody(BaseModel):
    username: str
    password: str


class ChatBody(BaseModel):
    question: str
    conversation_id: int | None = None
    stream: bool = True


def event_payload(event: ChatEvent) -> dict:
    """The JSON shape of one chat event (shared by the API and tests)."""
    if isinstance(event, RetrievalEvent):
        return {
            "type": "retrieval",
            "citations": [asdict(c) for c in event.citations],
            "retrieval_ms": round(event.retrieval_ms, 2),
        }
    if isinstance(event, DeltaEvent):
        return {"type": "delta", "text": event.text}
    if isinstance(event, DoneEvent):
        return {
            "type": "done",
            "conversation_id": event.conversation_id,
            "message_id": event.message_id,
            "stats": {**asdict(event.stats), "retrieval_ms": round(event.retrieval_ms, 2)},
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


def _error(exc: ChatError) -> HTTPException:
    headers = {}
    if exc.retry_after_s is not None:
        headers["Retry-After"] = str(max(1, round(exc.retry_after_s)))
    return HTTPException(
        _STATUS.get(exc.kind, 500), {"kind": exc.kind, "message": str(exc)}, headers=headers
    )


def build_router(auth: AuthService, chat: ChatService, engine: Engine) -> APIRouter:
    router = APIRouter()

    def principal(authorization: Annotated[str | None, Header()] = None) -> Principal:
        if not authorization or not authorization.lower().startswith("bearer "):
            raise HTTPException(401, "missing bearer token", {"WWW-Authenticate": "Bearer"})
        found = auth.resolve(authorization.split(" ", 1)[1].strip())
        if found is None:
            raise HTTPException(401, "invalid or expired token", {"WWW-Authenticate": "Bearer"})
        return found

    User = Annotated[Principal, Depends(principal)]

    @router.get("/health")
    def health() -> JSONResponse:
        ok = engine.health()
        return JSONResponse(
            {"status": "ok" if ok else "degraded", "engine": ok}, 200 if ok else 503
        )

    @router.post("/api/login")
    def login(body: LoginBody) -> dict:
        result = auth.login(body.username, body.password)
        if result is None:
            raise HTTPException(401, "wrong username or password")
        token, who = result
        return {"token": token, "username": who.username, "role": who.role}

    @router.post("/api/logout")
    def logout(user: User, authorization: Annotated[str, Header()]) -> dict:
        auth.logout(authorization.split(" ", 1)[1].strip())
        return {"ok": True}

    @router.get("/api/me")
    def me(user: User) -> dict:
        return {"username": user.username, "role": user.role}

    @router.get("/api/conversations")
    def conversations(user: User) -> list[dict]:
        return chat.list_conversations(user)

    @router.get("/api/conversations/{conversation_id}")
    def conversation(conversation_id: int, user: User) -> dict:
        try:
            return {"id": conversation_id, "messages": chat.get_messages(user, conversation_id)}
        except ChatError as exc:
            raise _error(exc) from exc

    @router.post("/api/chat", response_model=None)
    def ask(body: ChatBody, user: User) -> Response:
        try:
            events = chat.ask(user, body.question, body.conversation_id)
        except ChatError as exc:
            raise _error(exc) from exc
        if body.stream:
            gone = threading.Event()
            return ClosingStreamingResponse(_sse(events, gone), on_disconnect=gone.set)
        payloads = [event_payload(e) for e in events]
        answer = "".join(p["text"] for p in payloads if p["type"] == "delta")
        result = {"answer": answer, "events": [p for p in payloads if p["type"] != "delta"]}
        return JSONResponse(result, 200 if payloads[-1]["type"] == "done" else 502)

    return router


def build_api(auth: AuthService, chat: ChatService, engine: Engine) -> FastAPI:
    app = FastAPI(title="RAG appliance", docs_url=None, redoc_url=None)
    app.include_router(build_router(auth, chat, engine))
    return app
