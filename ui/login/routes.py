"""Browser sign-in for the Gradio pages: a login form, a session cookie, logout.

(No ``from __future__ import annotations`` here: FastAPI must see the real parameter types.)

The cookie holds a bearer session token from ``AuthService.login`` (only its hash is stored;
it expires after ``security.session_ttl_hours``), so the browser and the JSON API share one
session model: expiry, logout that ends the session on the server (``POST /logout``; a
``GET`` only asks), failures throttled per username and client address (429 with
``Retry-After``).
Gradio asks ``gradio_user`` who is behind each request (its ``auth_dependency``); a page
request without a live session is sent to ``/login``.
"""

from collections.abc import Callable
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, FastAPI, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from appliance.core.auth.client_address import client_address
from appliance.core.auth.directory_accounts import DirectorySettings
from appliance.core.auth.directory_signin import DIRECTORY_DOWN
from appliance.core.auth.principal import Principal
from appliance.core.auth.service import AuthService
from appliance.core.auth.throttle import whole_seconds
from ui.i18n import pick, t
from ui.login.oidc_routes import build_oidc_router
from ui.login.page import render_login, render_logout

SESSION_COOKIE = "appliance_session"
LANG_COOKIE = "appliance_lang"


def session_principal(auth: AuthService, request: Request) -> Principal | None:
    """The signed-in user of a browser request (from its session cookie), or None."""
    token = request.cookies.get(SESSION_COOKIE)
    return auth.resolve(token) if token else None


def gradio_user(auth: AuthService) -> Callable[[Request], str | None]:
    """Gradio's ``auth_dependency``: the username of a live session, else None (401)."""
    return lambda request: getattr(session_principal(auth, request), "username", None)


def request_language(request: Request) -> str:
    return pick(
        request.query_params.get("lang") or request.cookies.get(LANG_COOKIE),
        request.headers.get("accept-language"),
    )


def _safe_next(path: str | None) -> str:
    """Only same-site paths: an open redirect would let a link send users elsewhere."""
    if not path or not path.startswith("/") or path.startswith("//") or "\\" in path:
        return "/"
    return path


def build_login_router(
    auth: AuthService, directory: Callable[[], DirectorySettings] | None = None
) -> APIRouter:
    """The form, logout and, with ``directory`` (the directory settings in force), the
    OIDC routes and the "Sign in with" button while OIDC is enabled."""
    router = APIRouter()
    ttl_s = int(auth.ttl.total_seconds())

    def provider() -> str:
        oidc = directory().oidc if directory else None
        return oidc.display_name if oidc and oidc.enabled else ""

    def page(lang: str, message: str, status: int, username: str = "", nxt: str = "/") -> Response:
        response = HTMLResponse(render_login(lang, message, username, nxt, provider()), status)
        response.set_cookie(LANG_COOKIE, lang, max_age=365 * 86400, samesite="lax")
        response.headers["Cache-Control"] = "no-store"
        return response

    @router.get("/login", include_in_schema=False)
    def login_form(request: Request) -> Response:
        lang = request_language(request)
        nxt = _safe_next(request.query_params.get("next"))
        reason = request.query_params.get("reason")
        message = t(lang, f"login.{reason}") if reason in ("expired", "signed_out") else ""
        return page(lang, message, 200, nxt=nxt)

    @router.post("/login", include_in_schema=False)
    def login_submit(
        request: Request,
        username: Annotated[str, Form()],
        password: Annotated[str, Form()],
        next: Annotated[str, Form()] = "/",  # noqa: A002
        lang: Annotated[str, Form()] = "",
    ) -> Response:
        lang = pick(lang, request.headers.get("accept-language"))
        nxt = _safe_next(next)
        result = auth.login(username.strip(), password, client_address(request))
        if result.retry_after > 0:
            seconds = whole_seconds(result.retry_after)
            response = page(lang, t(lang, "login.locked", seconds=seconds), 429, username, nxt)
            response.headers["Retry-After"] = str(seconds)
            return response
        if result.refused:
            down = result.refused == DIRECTORY_DOWN
            note = t(lang, "login.directory_down" if down else "login.directory_refused")
            return page(lang, note, 503 if down else 403, username, nxt)
        if result.token is None:
            return page(lang, t(lang, "login.failed"), 401, username, nxt)
        response = RedirectResponse(nxt, status_code=303)
        set_session(response, request, result.token)
        return response

    def set_session(response: Response, request: Request, token: str) -> None:
        response.set_cookie(
            SESSION_COOKIE,
            token,
            max_age=ttl_s,
            httponly=True,
            samesite="lax",
            secure=request.url.scheme == "https",
        )

    @router.get("/logout", include_in_schema=False)
    def logout_page(request: Request) -> Response:
        """A bookmarked or typed ``/logout`` changes nothing (a link or an image elsewhere
        must not sign anyone out): signed in, it asks, with the button that posts."""
        if session_principal(auth, request) is None:
            return RedirectResponse("/login", status_code=303)
        response = HTMLResponse(render_logout(request_language(request)))
        response.headers["Cache-Control"] = "no-store"
        return response

    @router.post("/logout", include_in_schema=False)
    def logout(request: Request) -> Response:
        token = request.cookies.get(SESSION_COOKIE)
        if token:
            auth.logout(token)  # the session ends on the server, not only in this browser
        response = RedirectResponse("/login?reason=signed_out", status_code=303)
        response.delete_cookie(SESSION_COOKIE)
        return response

    if directory is not None:
        router.include_router(
            build_oidc_router(auth, directory, page, set_session, _safe_next, request_language)
        )
    return router


class LoginRedirect:
    """ASGI middleware: a browser page request (GET, ``Accept: text/html``) answered 401 is
    sent to the login form instead, with the page to return to. Every other request (API
    calls, event streams) passes through untouched, so streaming and disconnects behave
    exactly as without it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if "text/html" not in request.headers.get("accept", ""):
            await self.app(scope, receive, send)
            return
        redirected = False

        async def send_or_redirect(message: Message) -> None:
            nonlocal redirected
            if message["type"] == "http.response.start" and message["status"] == 401:
                redirected = True
                had_session = SESSION_COOKIE in request.cookies
                reason = "&reason=expired" if had_session else ""
                target = f"/login?next={quote(request.url.path)}{reason}"
                response = RedirectResponse(target, status_code=303)
                if had_session:
                    response.delete_cookie(SESSION_COOKIE)
                await response(scope, receive, send)
            elif not redirected:
                await send(message)

        await self.app(scope, receive, send_or_redirect)


def install_login(
    app: FastAPI, auth: AuthService, directory: Callable[[], DirectorySettings] | None = None
) -> None:
    """Add the login routes (and the OIDC ones with ``directory``) and the redirect of
    signed-out page requests to the form."""
    app.include_router(build_login_router(auth, directory))
    app.add_middleware(LoginRedirect)
