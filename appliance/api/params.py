"""Validated request parts the HTTP routes share: row ids, bounded query numbers, and JSON
bodies that are strict JSON. Bad input is refused here, at the edge, with a 422 (``/v1``: a
400, ``appliance.api.validation_errors``) before any service sees it; a value past what the
database or ``datetime`` can hold never reaches them (it used to be a 500).

(No ``from __future__ import annotations``: FastAPI must see the real types.)
"""

import json
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import Path, Query, Request, Response
from fastapi.routing import APIRoute
from pydantic import Field

from appliance.core.text import is_valid_unicode

# the largest row id (a signed 64-bit integer, on SQLite and PostgreSQL alike)
MAX_ID = 2**63 - 1

# a row id in a path (``/api/conversations/{conversation_id}``) or in a body
PathId = Annotated[int, Path(ge=1, le=MAX_ID)]
BodyId = Annotated[int, Field(ge=1, le=MAX_ID)]

# query numbers: finite, in ranges the services can use
Minutes = Annotated[float, Query(gt=0, le=60 * 24 * 31, allow_inf_nan=False)]  # a month
Days = Annotated[int, Query(ge=1, le=3660)]  # ten years
Limit = Annotated[int, Query(ge=1, le=10_000)]
TopK = Annotated[int, Query(ge=1, le=50)]


def _where(path: tuple[object, ...]) -> str:
    return ".".join(str(p) if is_valid_unicode(str(p)) else ascii(p) for p in path) or "body"


def check_text(data: object) -> None:
    """Raise ``ValueError`` naming the first string of ``data`` (decoded JSON; values and keys,
    at any depth) that is not valid Unicode: a lone surrogate, which JSON can spell
    (``"\\ud800"``) and UTF-8 bytes can smuggle in, can be neither stored nor tokenized."""
    stack: list[tuple[tuple[object, ...], object]] = [((), data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if not is_valid_unicode(value):
                raise ValueError(f"{_where(path)}: text is not valid Unicode (a lone surrogate)")
        elif isinstance(value, dict):
            for key, item in value.items():
                if not is_valid_unicode(key):
                    raise ValueError(f"{_where(path)}: a key is not valid Unicode")
                stack.append(((*path, key), item))
        elif isinstance(value, list):
            stack.extend(((*path, i), item) for i, item in enumerate(value))


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def strict_json(body: bytes) -> Any:  # noqa: ANN401 - any JSON value
    """``body`` decoded as strict JSON: no ``NaN``/``Infinity``, no text that is not valid
    Unicode; else ``json.JSONDecodeError`` (which FastAPI answers as a validation error)."""
    try:
        data = json.loads(body, parse_constant=_no_constant)
        check_text(data)
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # bytes that are not UTF-8, NaN, a lone surrogate
        raise json.JSONDecodeError(str(exc), "", 0) from exc
    return data


class _StrictJsonRequest(Request):
    async def json(self) -> Any:  # noqa: ANN401 - any JSON value
        if not hasattr(self, "_json"):
            self._json = strict_json(await self.body())
        return self._json


class StrictJsonRoute(APIRoute):
    """A route whose JSON body is decoded by ``strict_json``: every route of the API's routers
    (``APIRouter(route_class=StrictJsonRoute)``), whatever its body's declared type."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(_StrictJsonRequest(request.scope, request.receive))

        return strict
