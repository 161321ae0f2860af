"""The role check the request guards share: a session token (a bearer token or the browser's
cookie), resolved off the event loop, and the refusal a request without the role gets."""

from __future__ import annotations

from collections.abc import Callable

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.requests import cookie_parser
from starlette.responses import JSONResponse

from appliance.core.auth.principal import Principal


def cookie_token(headers: Headers, cookie: str) -> str | None:
    """The value of the ``cookie`` named session cookie, if the request carries one."""
    return cookie_parser(headers.get("cookie", "")).get(cookie)


async def role_refusal(
    token: str | None, resolve: Callable[[str], Principal | None], admin: bool
) -> JSONResponse | None:
    """None when ``token`` is a live session (an admin's, when ``admin``); else the 401 or
    403 to answer."""
    if not token:
        return _refusal(401, "sign in first: no session")
    who = await run_in_threadpool(resolve, token)
    if who is None:
        return _refusal(401, "invalid or expired session")
    if admin and not who.is_admin:
        return JSONResponse({"detail": "administrators only"}, 403)
    return None


def _refusal(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status, {"WWW-Authenticate": "Bearer"})
