"""OpenAI-compatible ``/v1/chat/completions`` with RAG, for integrators.

(No ``from __future__ import annotations`` here: FastAPI must see the real dependency types.)

Auth is a per-user API key (``Authorization: Bearer sk-...``). The last ``user`` message is
the question; retrieval, prompt assembly and storage are the chat page's (``ChatService``), so
a call is a turn in one of the key owner's conversations:
- the one named by the extra body field ``conversation_id``;
- else, when the request carries earlier user/assistant messages (clients resend the whole
  chat on every call), the owner's conversation with exactly those turns;
- else a new one.
Previous turns always come from the stored conversation, replayed byte-identically for the
prefix cache (it holds the documents each turn was given, which the client never saw). Earlier
messages that match no stored conversation start a new one, without that history, and the
response says so in ``history``: ``"continued"``, ``"new"`` or ``"unmatched"``.
Extra response fields (documented extensions of OpenAI's shape): ``citations`` (numbered
sources), ``evidence`` (the "From the documents" card: verbatim sentences with their citation
number and character offsets into the chunk's text, ``appliance.api.grounded``),
``verification`` (each answer sentence's verdict against the sources) and ``conversation_id``;
in a stream they ride on the first chunk (``citations``, ``evidence``: before any generated
token) and the last (``verification``, ``conversation_id`` and ``usage``). Errors use
OpenAI's ``{"error": {...}}`` shape.
"""

import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict

from appliance.api.bearer import api_key_dependency, principal_param
from appliance.api.errors import failed_turn_status, openai_status_of, retry_headers
from appliance.api.grounded import evidence_json, verification_json
from appliance.api.params import BodyId, StrictJsonRoute
from appliance.api.unstreamed import TurnJSONResponse
from appliance.core.auth.service import AuthService
from appliance.core.auth.throttle import whole_seconds
from appliance.core.errors import ChatError
from appliance.core.services.chat import (
    ChatEvent,
    DeltaEvent,
    DoneEvent,
    ErrorEvent,
    RetrievalEvent,
)
from appliance.core.services.conversations import ConversationService
from engine.base import Engine, GenerationStats
from engine.server.sse import DONE, ClosingStreamingResponse, sse

MODEL_ID = "rag-appliance"


class ContentPart(BaseModel):
    """One part of a message's content; only ``text`` parts are read."""

    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[ContentPart] | None = None


class CompletionBody(BaseModel):
    model_config = ConfigDict(extra="allow")  # temperature, max_tokens...: the admin's settings
    model: str = MODEL_ID
    messages: list[ChatMessage]
    stream: bool = False
    conversation_id: BodyId | None = None


class OpenAIError(HTTPException):
    """An error answered in OpenAI's shape; ``kind`` is its ``type``."""

    def __init__(self, status: int, message: str, kind: str, headers: dict | None = None) -> None:
        super().__init__(status, message, headers)
        self.kind = kind


def _text(content: str | list[ContentPart] | None) -> str:
    if isinstance(content, list):  # content parts: keep the text ones
        return "".join(p.text or "" for p in content if p.type == "text")
    return content or ""


def question_of(messages: list[ChatMessage]) -> str:
    """The last user message's text: the question this call asks."""
    for m in reversed(messages):
        if m.role == "user":
            return _text(m.content)
    raise OpenAIError(400, "messages must contain a user message", "invalid_request_error")


def earlier_turns(messages: list[ChatMessage]) -> list[tuple[str, str]] | None:
    """The (question, answer) pairs before the last user message; None when those messages
    are not alternating user/assistant turns (system messages are skipped)."""
    last = max(i for i, m in enumerate(messages) if m.role == "user")
    chat = [m for m in messages[:last] if m.role != "system"]
    if len(chat) % 2 or any(
        m.role != ("user" if i % 2 == 0 else "assistant") for i, m in enumerate(chat)
    ):
        return None
    pairs = zip(chat[::2], chat[1::2], strict=True)
    return [(_text(q.content), _text(a.content)) for q, a in pairs]


def usage(stats: GenerationStats) -> dict:
    return {
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.completion_tokens,
        "total_tokens": stats.prompt_tokens + stats.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": stats.cached_tokens},
    }


def _finish(stats: GenerationStats) -> str:
    return "length" if stats.finish_reason == "length" else "stop"


def _chat_error(exc: ChatError) -> OpenAIError:
    status = openai_status_of(exc.kind)
    kind = "invalid_request_error" if status < 500 else "engine_unavailable"
    return OpenAIError(status, str(exc), kind, retry_headers(exc) or None)


def _stream(
    events: Iterator[ChatEvent], rid: str, history: str, gone: threading.Event
) -> Iterator[str]:
    created = int(time.time())
    base = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": MODEL_ID}
    try:
        for event in events:
            if gone.is_set():
                return
            if isinstance(event, RetrievalEvent):
                delta = {"role": "assistant", "content": ""}
                citations = [asdict(c) for c in event.citations]
                choice = {"index": 0, "delta": delta, "finish_reason": None}
                evidence = evidence_json(event.evidence)
                yield sse(
                    {**base, "choices": [choice], "citations": citations, "evidence": evidence}
                )
            elif isinstance(event, DeltaEvent):
                choice = {"index": 0, "delta": {"content": event.text}, "finish_reason": None}
                yield sse({**base, "choices": [choice]})
            elif isinstance(event, DoneEvent):
                choice = {"index": 0, "delta": {}, "finish_reason": _finish(event.stats)}
                yield sse(
                    {
                        **base,
                        "choices": [choice],
                        "usage": usage(event.stats),
                        "conversation_id": event.conversation_id,
                        "history": history,
                        "verification": verification_json(event.check),
                    }
                )
            elif isinstance(event, ErrorEvent):
                yield sse({"error": {"message": event.message, "type": event.kind}})
    except Exception as exc:  # never cut a stream without telling the client why
        yield sse({"error": {"message": f"internal error: {exc}", "type": "internal"}})
    finally:
        events.close()  # cancels generation if the client left mid-answer
    yield DONE


def _complete(events: Iterator[ChatEvent], rid: str, history: str) -> tuple[dict, int]:
    """A finished turn as one ``chat.completion`` object, and its status."""
    citations: list[dict] = []
    evidence: list[dict] = []
    for event in events:
        if isinstance(event, RetrievalEvent):
            citations = [asdict(c) for c in event.citations]
            evidence = evidence_json(event.evidence)
        elif isinstance(event, ErrorEvent):
            body = {"error": {"message": event.message, "type": event.kind}}
            return body, failed_turn_status(event.kind)
        elif isinstance(event, DoneEvent):
            message = {"role": "assistant", "content": event.answer}
            return (
                {
                    "id": rid,
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": MODEL_ID,
                    "choices": [
                        {"index": 0, "message": message, "finish_reason": _finish(event.stats)}
                    ],
                    "usage": usage(event.stats),
                    "citations": citations,
                    "evidence": evidence,
                    "verification": verification_json(event.check),
                    "conversation_id": event.conversation_id,
                    "history": history,
                },
                200,
            )
    return {"error": {"message": "no answer", "type": "internal"}}, 500


def _too_many_invalid_keys(retry_after: float) -> OpenAIError:
    wait = whole_seconds(retry_after)
    message = f"too many invalid API keys from this address; try again in {wait} s"
    return OpenAIError(429, message, "rate_limit_exceeded", {"Retry-After": str(wait)})


def build_openai_router(
    auth: AuthService, conversations: ConversationService, engine: Engine
) -> APIRouter:
    """``/v1/models`` and ``/v1/chat/completions``, for the owner of an API key. JSON bodies
    are strict (``StrictJsonRoute``)."""
    router = APIRouter(route_class=StrictJsonRoute)
    Owner = principal_param(
        api_key_dependency(
            auth.api_keys.authenticate,
            missing=lambda: OpenAIError(
                401, "missing API key (Authorization: Bearer sk-...)", "auth"
            ),
            invalid=lambda: OpenAIError(401, "invalid or revoked API key", "invalid_api_key"),
            throttled=_too_many_invalid_keys,
        )
    )

    @router.get("/v1/models")
    def models(owner: Owner) -> dict:
        info = engine.info() if engine.health() else None
        entry = {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "appliance"}
        if info is not None:
            entry["root"] = info.model
        return {"object": "list", "data": [entry]}

    @router.post("/v1/chat/completions", response_model=None)
    def completions(body: CompletionBody, owner: Owner) -> Response:
        question = question_of(body.messages)
        conversation_id, history = body.conversation_id, "continued"
        if conversation_id is None:
            turns = earlier_turns(body.messages)
            if turns:
                conversation_id = conversations.find_by_history(owner, turns)
            history = "new" if turns == [] else "continued" if conversation_id else "unmatched"
        try:
            events = conversations.ask(owner, question, conversation_id)
        except ChatError as exc:
            raise _chat_error(exc) from exc
        rid = f"chatcmpl-{uuid.uuid4().hex}"
        if body.stream:
            gone = threading.Event()
            stream = _stream(events, rid, history, gone)
            return ClosingStreamingResponse(stream, on_disconnect=gone.set)
        # one JSON object, and a client that leaves cancels generation as in a stream
        return TurnJSONResponse(events, lambda done: _complete(done, rid, history))

    return router


async def openai_error_handler(request: Request, exc: OpenAIError) -> JSONResponse:  # noqa: ARG001
    """OpenAI's error shape, which its clients parse into their exceptions."""
    error = {"message": exc.detail, "type": exc.kind, "param": None, "code": exc.status_code}
    body = {"error": error}
    return JSONResponse(body, exc.status_code, headers=exc.headers)
