"""What the request guards share: the role check of a session token (a bearer token or the
browser's cookie), resolved off the event loop, and the JSON refusal a guard answers with."""

from __future__ import annotations

from collections.abc import Callable

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.requests import cookie_parser
from starlette.responses import JSONResponse

from appliance.core.auth.principal import Principal

BEARER = {"WWW-Authenticate": "Bearer"}


def cookie_token(headers: Headers, cookie: str) -> str | None:
    """The value of the ``cookie`` named session cookie, if the request carries one."""
    return cookie_parser(headers.get("cookie", "")).get(cookie)


async def role_refusal(
    token: str | None, resolve: Callable[[str], Principal | None], admin: bool
) -> JSONResponse | None:
    """None when ``token`` is a live session (an admin's, when ``admin``); else the 401 or
    403 to answer."""
    if not token:
        return refusal(401, "sign in first: no session", BEARER)
    who = await run_in_threadpool(resolve, token)
    if who is None:
        return refusal(401, "invalid or expired session", BEARER)
    if admin and not who.is_admin:
        return refusal(403, "administrators only")
    return None


def refusal(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """A guard's answer: ``{"detail": ...}`` with ``status`` (never the request repeated)."""
    return JSONResponse({"detail": detail}, status, headers)
