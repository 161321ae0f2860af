"""Sign-in with the company's OpenID Connect provider: ``GET /oidc/login`` sends the browser to
the provider, ``GET /oidc/callback`` signs the account in (``DirectorySignIn.claims``) and sets
the same session cookie as the password form.

(No ``from __future__ import annotations`` here: FastAPI must see the real parameter types.)

The ``state`` is bound to the browser by a short-lived cookie (a callback carrying another
browser's state is refused: login CSRF), and to the server-side record of the started
sign-in, which is used once. Every refusal is audited and shown on the login page; none
creates a session.
"""

from collections.abc import Callable

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from appliance.core.auth.client_address import client_address
from appliance.core.auth.directory_accounts import DirectorySettings
from appliance.core.auth.oidc_client import (
    OidcClient,
    OidcError,
    PendingStore,
    ProviderDown,
)
from appliance.core.auth.service import AuthService
from appliance.core.directory_config import OidcConfig
from ui.i18n import t

STATE_COOKIE = "appliance_oidc"
MAX_PARAM = 4096  # longer code or state values are refused unread


def _callback_url(request: Request, oidc: OidcConfig) -> str:
    return oidc.redirect_url or str(request.url_for("oidc_callback"))


def build_oidc_router(
    auth: AuthService,
    settings: Callable[[], DirectorySettings],
    page: Callable[..., Response],
    session_cookie: Callable[[Response, Request, str], None],
    safe_next: Callable[[str | None], str],
    language: Callable[[Request], str],
) -> APIRouter:
    """The two routes; ``page(lang, message, status)`` renders the login form with a note,
    ``session_cookie`` sets the session cookie for a token."""
    router = APIRouter()
    pending = PendingStore()
    clients: dict[OidcConfig, OidcClient] = {}

    def client_for(oidc: OidcConfig) -> OidcClient:
        if oidc not in clients:
            clients.clear()  # the settings changed: forget the old provider's keys
            clients[oidc] = OidcClient(oidc)
        return clients[oidc]

    def refuse(
        request: Request, reason: str, status: int, down: bool = False, used: bool = True
    ) -> Response:
        """The login page with a note; ``used``: this browser's started sign-in is over (a
        callback with another state leaves it be: a hostile link must not end it)."""
        action = "login.oidc.down" if down else "login.oidc.failed"
        auth.audit("(oidc)", action, {"client": client_address(request), "reason": reason[:300]})
        lang = language(request)
        response = page(lang, t(lang, "login.oidc_down" if down else "login.oidc_failed"), status)
        if used:
            response.delete_cookie(STATE_COOKIE, path="/oidc")
        return response

    @router.get("/oidc/login", include_in_schema=False)
    def oidc_login(request: Request) -> Response:
        oidc = settings().oidc
        if not oidc.enabled:
            return Response(status_code=404)
        nxt = safe_next(request.query_params.get("next"))
        try:
            started, url = client_for(oidc).begin(_callback_url(request, oidc), nxt)
        except ProviderDown as exc:
            return refuse(request, str(exc), 503, down=True)
        except OidcError as exc:
            return refuse(request, str(exc), 502)
        pending.put(started)
        response = RedirectResponse(url, status_code=303)
        response.set_cookie(
            STATE_COOKIE,
            started.state,
            max_age=600,
            path="/oidc",
            httponly=True,
            samesite="lax",
            secure=request.url.scheme == "https",
        )
        response.headers["Cache-Control"] = "no-store"
        return response

    @router.get("/oidc/callback", include_in_schema=False, name="oidc_callback")
    def oidc_callback(request: Request) -> Response:
        oidc = settings().oidc
        if not oidc.enabled:
            return Response(status_code=404)
        query = request.query_params
        state, code = query.get("state") or "", query.get("code") or ""
        if len(state) > MAX_PARAM or len(code) > MAX_PARAM:
            return refuse(request, "oversized state or code", 400, used=False)
        if not state or state != request.cookies.get(STATE_COOKIE):
            return refuse(
                request, "the state does not match this browser's sign-in", 400, used=False
            )
        started = pending.take(state)
        if started is None:
            return refuse(request, "unknown or expired state", 400, used=False)
        if query.get("error"):
            return refuse(request, f"the provider answered {query.get('error')[:100]}", 400)
        if not code:
            return refuse(request, "no authorization code", 400)
        try:
            claims = client_for(oidc).finish(started, code)
        except ProviderDown as exc:
            return refuse(request, str(exc), 503, down=True)
        except OidcError as exc:
            return refuse(request, str(exc), 400)
        if auth.directory is None:
            return refuse(request, "directory sign-in is not wired", 503)
        outcome = auth.directory.claims(claims, client_address(request))  # audited there
        if outcome.principal is None:
            lang = language(request)
            response = page(lang, t(lang, "login.directory_refused"), 403)
            response.delete_cookie(STATE_COOKIE, path="/oidc")
            return response
        response = RedirectResponse(started.next_path, status_code=303)
        session_cookie(response, request, auth.start_session(outcome.principal))
        response.delete_cookie(STATE_COOKIE, path="/oidc")
        return response

    return router
