"""The one error-kind list and its HTTP statuses: every kind has one on ``/api`` and on
``/v1``, and the statuses are the ones the APIs have always answered."""

# (No ``from __future__ import annotations``: FastAPI must see the endpoints' real types.)

import contextlib
import importlib

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from appliance.api.errors import (
    OPENAI_STATUS_OVERRIDES,
    STATUS,
    failed_turn_status,
    http_error,
    openai_status_of,
    refused,
    status_of,
)
from appliance.core.errors import ALL_ERROR_KINDS, ChatError, engine_kind
from engine.base import EngineBusy, EngineError

# what each API answers, kind by kind (a change here is a change of the HTTP contract)
API_STATUS = {
    "empty": 400,
    "too_long": 413,
    "invalid": 400,
    "not_found": 404,
    "busy": 503,
    "unavailable": 503,
    "prompt_too_long": 413,
    "invalid_request": 400,
    "engine_error": 502,
    "grammar_violation": 500,
    "internal": 500,
}
OPENAI_STATUS = {
    "empty": 400,
    "too_long": 400,
    "invalid": 503,
    "not_found": 404,
    "busy": 503,
    "unavailable": 503,
    "prompt_too_long": 400,
    "invalid_request": 503,
    "engine_error": 503,
    "grammar_violation": 503,
    "internal": 503,
}


def test_every_error_kind_has_a_status() -> None:
    assert set(STATUS) == set(ALL_ERROR_KINDS)
    assert len(ALL_ERROR_KINDS) == len(set(ALL_ERROR_KINDS))
    assert set(OPENAI_STATUS_OVERRIDES) <= set(ALL_ERROR_KINDS)
    for kind in ALL_ERROR_KINDS:
        assert status_of(kind) == API_STATUS[kind], kind
        assert openai_status_of(kind) == OPENAI_STATUS[kind], kind


def test_overrides_are_only_the_differences() -> None:
    for kind, status in OPENAI_STATUS_OVERRIDES.items():
        assert STATUS[kind] != status, f"{kind}: the override says what the table says"


def test_unknown_kinds_keep_the_old_fallbacks() -> None:
    assert status_of("no-such-kind") == 500  # type: ignore[arg-type]
    assert openai_status_of("no-such-kind") == 503  # type: ignore[arg-type]


def test_a_failed_turn_is_503_when_retryable_else_502() -> None:
    for kind in ALL_ERROR_KINDS:
        assert failed_turn_status(kind) == (503 if kind in ("busy", "unavailable") else 502)


def _engine_error_classes() -> list[type[EngineError]]:
    for module in ("engine.embedded.grammar",):  # subclasses defined outside engine.base
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    found, todo = [], [EngineError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return found


@pytest.mark.parametrize("cls", _engine_error_classes(), ids=lambda c: c.__name__)
def test_every_engine_error_kind_is_an_error_kind(cls: type[EngineError]) -> None:
    assert cls.kind in ALL_ERROR_KINDS


def test_chat_error_from_an_engine_error() -> None:
    err = ChatError.from_engine(EngineBusy("queue full", retry_after_s=2.4))
    assert (err.kind, str(err), err.retry_after_s) == ("busy", "queue full", 2.4)
    assert engine_kind(EngineError("x")) == "engine_error"
    plain = ChatError.from_engine(EngineError("down"))
    assert plain.retry_after_s is None


def test_http_error_carries_kind_message_and_retry_after() -> None:
    exc = http_error(ChatError("busy", "queue full", retry_after_s=0.2))
    assert exc.status_code == 503
    assert exc.detail == {"kind": "busy", "message": "queue full"}
    assert exc.headers == {"Retry-After": "1"}
    assert http_error(ChatError("too_long", "long")).headers == {}


def test_refused_answers_with_the_status_of_its_kind() -> None:
    app = FastAPI()

    @app.get("/bad")
    def bad() -> dict:
        with refused(ValueError):
            raise ValueError("no good")

    @app.get("/missing")
    def missing() -> dict:
        with refused(KeyError, ValueError, kind="not_found"):
            raise ValueError("no such thing")

    @app.get("/fine")
    def fine() -> dict:
        with refused(ValueError):
            return {"ok": True}

    client = TestClient(app)
    assert (client.get("/bad").status_code, client.get("/bad").json()) == (
        400,
        {"detail": "no good"},
    )
    assert client.get("/missing").status_code == 404
    assert client.get("/fine").json() == {"ok": True}
