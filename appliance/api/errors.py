"""HTTP statuses for the ``ErrorKind`` of a refusal: one table for the JSON API and the admin
API, and the OpenAI-compatible ``/v1``'s differences from it, written out beside it.

(No ``from __future__ import annotations``: the FastAPI modules import from here.)
"""

from collections.abc import Iterator
from contextlib import contextmanager
from types import MappingProxyType

from fastapi import HTTPException

from appliance.core.errors import ChatError, ErrorKind

# every kind has its status (tests/appliance/api/test_errors.py checks that none is missing)
STATUS: MappingProxyType[ErrorKind, int] = MappingProxyType(
    {
        "empty": 400,
        "too_long": 413,
        "invalid": 400,
        "not_found": 404,
        "busy": 503,
        "unavailable": 503,
        "prompt_too_long": 413,
        "invalid_request": 400,
        "engine_error": 502,
        "grammar_violation": 500,  # the engine's own bug
        "internal": 500,
    }
)
# a kind this table has not heard of (an engine class added without a kind here)
UNKNOWN_STATUS = 500

# ``/v1`` answers as OpenAI does: bad input is 400 whatever its kind, a missing conversation
# 404, and anything else 503 (``engine_unavailable``; OpenAI's clients retry it). Where that
# differs from ``STATUS``:
OPENAI_STATUS_OVERRIDES: MappingProxyType[ErrorKind, int] = MappingProxyType(
    {
        "too_long": 400,  # OpenAI answers 400 for an over-long message, not 413
        "prompt_too_long": 400,  # likewise 400 (context_length_exceeded) when over the context
        "invalid": 503,  # not raised by a /v1 turn; OpenAI clients see it as the engine's
        "invalid_request": 503,  # the engine refused what we built, not the client's input
        "engine_error": 503,  # engine_unavailable rather than a bad gateway
        "grammar_violation": 503,  # engine_unavailable, as every engine failure
        "internal": 503,  # engine_unavailable, as every failure not the client's
    }
)
OPENAI_UNKNOWN_STATUS = 503


def status_of(kind: ErrorKind) -> int:
    """The HTTP status of a refusal of ``kind`` on ``/api``."""
    return STATUS.get(kind, UNKNOWN_STATUS)


def openai_status_of(kind: ErrorKind) -> int:
    """The HTTP status of a refusal of ``kind`` on ``/v1``."""
    if kind in OPENAI_STATUS_OVERRIDES:
        return OPENAI_STATUS_OVERRIDES[kind]
    return STATUS.get(kind, OPENAI_UNKNOWN_STATUS)


def failed_turn_status(kind: ErrorKind) -> int:
    """The status of a non-streamed ``/v1`` answer whose turn started and then failed: the
    engine's "try again later" (503) stays 503; any other failure is a bad gateway (502)."""
    return 503 if status_of(kind) == 503 else 502


def retry_headers(exc: ChatError) -> dict[str, str]:
    """``Retry-After`` (whole seconds, at least 1) when the refusal carries a retry hint."""
    if exc.retry_after_s is None:
        return {}
    return {"Retry-After": str(max(1, round(exc.retry_after_s)))}


def http_error(exc: ChatError) -> HTTPException:
    """A ``ChatError`` as ``/api`` answers it: its status, ``{"kind", "message"}`` as the
    detail, and ``Retry-After`` when the refusal has one."""
    return HTTPException(
        status_of(exc.kind), {"kind": exc.kind, "message": str(exc)}, headers=retry_headers(exc)
    )


@contextmanager
def refused(*errors: type[Exception], kind: ErrorKind = "invalid") -> Iterator[None]:
    """A service's refusal (one of ``errors``) becomes an HTTP error with the status of
    ``kind`` and the refusal's message as its detail."""
    try:
        yield
    except errors as exc:
        raise HTTPException(status_of(kind), str(exc)) from exc
