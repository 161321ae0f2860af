"""Engine errors and bad requests as HTTP answers.

Native routes answer SGLang's shape, ``{"error": {"message": ...}}``; ``/v1`` routes answer
OpenAI's, ``{"error": {"message", "type", "param", "code"}}``. ``EngineBusy`` carries a
``Retry-After`` header (whole seconds).
"""

from __future__ import annotations

import math

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from engine.base import (
    EngineBusy,
    EngineError,
    EngineUnavailable,
    InvalidRequest,
    PromptTooLong,
)


def status_for(exc: EngineError) -> int:
    if isinstance(exc, InvalidRequest | PromptTooLong):
        return 400
    if isinstance(exc, EngineBusy | EngineUnavailable):
        return 503
    return 500


def retry_after_headers(exc: EngineError) -> dict[str, str]:
    if isinstance(exc, EngineBusy):
        return {"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))}
    return {}


def native_error(message: str, kind: str = "invalid_request") -> dict:
    return {"error": {"message": message, "type": kind}}


def openai_error(message: str, status: int, kind: str) -> dict:
    kind_of = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind_of, "param": None, "code": kind}}


def error_response(exc: EngineError, *, openai: bool) -> JSONResponse:
    status = status_for(exc)
    body = openai_error(str(exc), status, exc.kind) if openai else native_error(str(exc), exc.kind)
    return JSONResponse(body, status, headers=retry_after_headers(exc))


def stream_error(exc: BaseException, *, openai: bool) -> dict:
    """The payload of a ``data:`` line that reports a failure mid-stream."""
    kind = exc.kind if isinstance(exc, EngineError) else "internal"
    message = str(exc) if isinstance(exc, EngineError) else f"internal error: {exc}"
    if openai:
        status = status_for(exc) if isinstance(exc, EngineError) else 500
        return openai_error(message, status, kind)
    return native_error(message, kind)


def _is_openai(request: Request) -> bool:
    return request.url.path.startswith("/v1/")


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(x) for x in err.get("loc", ()) if x != "body")
        parts.append(f"{where}: {err.get('msg', 'invalid')}" if where else err.get("msg", ""))
    return "invalid request: " + "; ".join(parts)


def install_error_handlers(app: FastAPI) -> None:
    """Engine errors raised by a route, and malformed bodies (400, never FastAPI's 422)."""

    async def on_engine_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, EngineError)
        return error_response(exc, openai=_is_openai(request))

    async def on_validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return error_response(InvalidRequest(_validation_message(exc)), openai=_is_openai(request))

    app.add_exception_handler(EngineError, on_engine_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
