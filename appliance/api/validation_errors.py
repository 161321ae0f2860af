"""The answer to a request that fails validation (FastAPI's ``RequestValidationError``).

FastAPI's own answer repeats every bad value (``input``), so a 5 MB body came back whole, and
a value that is not valid Unicode could not even be encoded (a 500). Here a 422 lists where and
what (``type``, ``loc``, ``msg``: at most ``MAX_ERRORS``, each message cut short), never the
input; on ``/v1`` the answer is OpenAI's: a 400 with
``{"error": {"message", "type": "invalid_request_error", "param", "code"}}``.

(No ``from __future__ import annotations``: the FastAPI modules import from here.)
"""

from collections.abc import Sequence

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

MAX_ERRORS = 10
MAX_MESSAGE = 200
MAX_LOC_PART = 64
# the first ``loc`` part says where the value was, not which field
_PLACES = frozenset({"body", "query", "path", "header", "cookie"})


def _short(text: object, limit: int) -> str:
    """``text`` as valid UTF-8 (lone surrogates escaped), at most ``limit`` characters."""
    shown = str(text).encode("utf-8", "backslashreplace").decode("utf-8")
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def _message(error: dict) -> str:
    message = str(error.get("msg", ""))
    reason = (error.get("ctx") or {}).get("error")
    if error.get("type") == "json_invalid" and reason:  # why the JSON is not JSON
        message = f"{message}: {reason}"
    return _short(message, MAX_MESSAGE)


def errors_of(exc: RequestValidationError) -> list[dict]:
    """The errors as they are answered: type, location and message, without the input."""
    return [
        {
            "type": _short(e.get("type", "invalid"), MAX_LOC_PART),
            "loc": [p if isinstance(p, int) else _short(p, MAX_LOC_PART) for p in e["loc"]],
            "msg": _message(e),
        }
        for e in list(exc.errors())[:MAX_ERRORS]
    ]


def _param(loc: Sequence[object]) -> str | None:
    """A dotted field path (``messages.0.role``), as OpenAI's ``param``."""
    parts = list(loc[1:] if loc and loc[0] in _PLACES else loc)
    return ".".join(str(p) for p in parts) or None


def is_openai_path(path: str) -> bool:
    return path == "/v1" or path.startswith("/v1/")


def openai_invalid(errors: list[dict]) -> JSONResponse:
    """``errors`` as OpenAI answers a bad request (400, its error shape)."""
    first = errors[0] if errors else {"type": "invalid", "loc": [], "msg": "invalid request"}
    message = "; ".join(
        f"{_param(e['loc'])}: {e['msg']}" if _param(e["loc"]) else e["msg"] for e in errors[:3]
    )
    body = {
        "error": {
            "message": message or first["msg"],
            "type": "invalid_request_error",
            "param": _param(first["loc"]),
            "code": first["type"],
        }
    }
    return JSONResponse(body, 400)


async def validation_error_handler(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 ``{"detail": [...]}`` without the input; OpenAI's 400 on ``/v1``."""
    errors = errors_of(exc)
    if is_openai_path(request.scope.get("path", "")):
        return openai_invalid(errors)
    return JSONResponse({"detail": errors}, 422)


def install_validation_errors(app: FastAPI) -> None:
    """Answer ``app``'s validation errors as this module says."""
    app.add_exception_handler(RequestValidationError, validation_error_handler)
