"""``build_web_app(appliance)``: the FastAPI app a built appliance serves.

Order matters: the JSON/SSE API and ``/v1`` first, then the sign-in pages, the admin console
and ``/metrics``, and the Gradio chat page at ``/`` last (a mount at ``/`` answers every path
registered after it).

Around all of it, outermost first: ``ProxyHeaders`` (the client address and scheme a trusted
proxy forwards, when ``security.trusted_proxies`` lists any), ``SecurityHeaders`` (every
answer, refusals included), ``HostGuard`` (the ``Host`` names this box: no DNS rebinding),
``OriginGuard`` (no cross-origin writes, no CORS unless allowed),
``BodyGuard`` (bounded bodies, uploads authenticated before they are read), ``GradioGuard``
(each Gradio page's uploads, files and event calls, for its role), then the sign-in redirect.

Every Gradio page is mounted with run history off: Gradio would otherwise keep each call's
inputs (a new password, a freshly made API key) in the browser's ``localStorage``.
"""

from __future__ import annotations

import gradio as gr
from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from starlette.routing import Mount

from appliance.api.chat import build_api
from appliance.api.validation_errors import install_validation_errors
from appliance.core.auth.client_address import TrustedProxies
from appliance.core.services.conversations import ConversationService
from appliance.wiring.admin import mount_admin
from appliance.wiring.appliance import Appliance
from appliance.wiring.body_guard import BodyGuard, UploadRoute
from appliance.wiring.gradio_guard import GradioGuard, GradioPage
from appliance.wiring.headers import SecurityHeaders
from appliance.wiring.host_guard import HostGuard
from appliance.wiring.metrics import mount_metrics
from appliance.wiring.origin import OriginGuard
from appliance.wiring.proxy_headers import ProxyHeaders
from ui.chat_page import CSS, JS, build_chat_page, theme
from ui.login.routes import SESSION_COOKIE, gradio_user, install_login

# the routes that take big bodies (document uploads), and where their admin credential is
UPLOADS = (
    UploadRoute("POST", "/api/admin/documents", "bearer"),
    UploadRoute("POST", "/admin/gradio_api/upload", "cookie"),
)


def build_web_app(appliance: Appliance) -> FastAPI:
    """The API, the OpenAI-compatible ``/v1``, the sign-in pages, the admin console, ``/metrics``
    and the chat page, on one app.

    Browser sessions are the API's hashed, expiring session tokens in an HttpOnly cookie
    (``ui.login.routes``); Gradio asks ``gradio_user`` who is behind each request."""
    conversations = ConversationService(appliance.db, appliance.chat)
    app = build_api(appliance.auth, appliance.chat, appliance.engine, conversations)
    directory = appliance.directory.current if appliance.directory else None
    install_login(app, appliance.auth, directory)

    @app.get("/admin", include_in_schema=False)
    def admin_slash() -> RedirectResponse:
        return RedirectResponse("/admin/", status_code=307)  # the console is mounted at /admin/

    console, admin_page = mount_admin(app, appliance)
    mount_metrics(app, appliance, console.sampler)
    config = appliance.config
    page = build_chat_page(conversations, appliance.auth, config.engine, config.chat)
    gr.mount_gradio_app(
        app,
        page,
        path="/",
        auth_dependency=gradio_user(appliance.auth),
        theme=theme(),
        css=CSS,
        js=JS,
        ssr_mode=False,
        footer_links=[],
        run_history=False,  # nothing a user typed is kept in the browser
    )
    # Gradio's apps answer a malformed call with FastAPI's own 422, which repeats the input
    for route in app.routes:
        if isinstance(route, Mount) and isinstance(route.app, FastAPI):
            install_validation_errors(route.app)
    pages = (
        # the chat page takes no uploads and hands out no files
        GradioPage("", "staff", uploads=False, files=False, events=page.fns.keys),
        GradioPage("/admin", "admin", uploads=True, files=True, events=admin_page.fns.keys),
    )
    _guard(app, appliance, pages)
    return app


def _guard(app: FastAPI, appliance: Appliance, pages: tuple[GradioPage, ...]) -> None:
    """The guards around the whole app (added innermost first)."""
    config = appliance.config
    app.add_middleware(
        GradioGuard, pages=pages, resolve=appliance.auth.resolve, cookie=SESSION_COOKIE
    )
    app.add_middleware(
        BodyGuard,
        resolve=appliance.auth.resolve,
        cookie=SESSION_COOKIE,
        uploads=UPLOADS,
        upload_limit=config.rag.max_upload_batch_mb * 1024 * 1024,
        body_limit=config.security.max_body_kb * 1024,
    )
    app.add_middleware(OriginGuard, allowed_origins=config.security.allowed_origins)
    app.add_middleware(HostGuard, allowed_hosts=config.security.allowed_hosts)
    app.add_middleware(SecurityHeaders)
    trusted = TrustedProxies.parse(config.security.trusted_proxies)
    if trusted:  # outermost: every guard and route sees the client a trusted proxy names
        app.add_middleware(ProxyHeaders, trusted=trusted)
