"""The ``Authorization: Bearer ...`` dependency the HTTP APIs share.

(No ``from __future__ import annotations``: FastAPI must see the real dependency types.)

``/api`` and ``/api/admin`` take a session token (``POST /api/login``), ``/v1`` an API key
(``api_key_dependency``: invalid keys are counted per client address, and refused with the time
to wait once there are too many); each says how it refuses a missing or unknown token.
"""

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, Header, HTTPException, Request

from appliance.core.auth.api_keys import KeyCheck
from appliance.core.auth.client_address import client_address
from appliance.core.auth.principal import Principal
from appliance.core.auth.service import AuthService

Resolve = Callable[[str], Principal | None]
Refusal = Callable[[], HTTPException]
Authenticate = Callable[[str, str], KeyCheck]  # (key, client address)
Throttled = Callable[[float], HTTPException]  # the seconds to wait
BearerDependency = Callable[..., Principal]
# an endpoint parameter's annotation, ``Annotated[Principal, Depends(...)]`` (not a class)
PrincipalParam = Any


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (``""`` when it names none),
    or None when the header is missing or of another scheme."""
    if not authorization or not authorization.lower().startswith("bearer "):
        return None
    return authorization.split(" ", 1)[1].strip()


def _unauthorized(message: str) -> Refusal:
    return lambda: HTTPException(401, message, {"WWW-Authenticate": "Bearer"})


MISSING_TOKEN = _unauthorized("missing bearer token")
INVALID_TOKEN = _unauthorized("invalid or expired token")


def bearer_dependency(
    resolve: Resolve,
    *,
    missing: Refusal = MISSING_TOKEN,
    invalid: Refusal = INVALID_TOKEN,
    admin_only: bool = False,
) -> BearerDependency:
    """A dependency giving the ``Principal`` that ``resolve`` finds for the bearer token.
    Raises ``missing()`` without a bearer token, ``invalid()`` when ``resolve`` finds no one,
    and, with ``admin_only``, 403 for a signed-in non-admin."""

    def principal(authorization: Annotated[str | None, Header()] = None) -> Principal:
        token = bearer_token(authorization)
        if token is None:
            raise missing()
        found = resolve(token)
        if found is None:
            raise invalid()
        if admin_only and not found.is_admin:
            raise HTTPException(403, "administrators only")
        return found

    return principal


def api_key_dependency(
    authenticate: Authenticate, *, missing: Refusal, invalid: Refusal, throttled: Throttled
) -> BearerDependency:
    """A dependency giving the owner of the bearer API key, checked by ``authenticate`` with
    the request's client address. Raises ``missing()`` without a bearer token, ``invalid()``
    for a key that is no live one, ``throttled(seconds)`` when that address sent too many."""

    def principal(
        request: Request, authorization: Annotated[str | None, Header()] = None
    ) -> Principal:
        token = bearer_token(authorization)
        if token is None:
            raise missing()
        check = authenticate(token, client_address(request))
        if check.principal is None:
            raise throttled(check.retry_after) if check.retry_after > 0 else invalid()
        return check.principal

    return principal


def session_user(auth: AuthService) -> BearerDependency:
    """The signed-in user of a session token, else 401."""
    return bearer_dependency(auth.resolve)


def session_admin(auth: AuthService) -> BearerDependency:
    """The signed-in admin of a session token, else 401 (no/invalid token) or 403 (not admin)."""
    return bearer_dependency(auth.resolve, admin_only=True)


def principal_param(dependency: BearerDependency) -> PrincipalParam:
    """The annotation of an endpoint parameter that ``dependency`` fills in."""
    return Annotated[Principal, Depends(dependency)]
