"""``SecurityHeaders``: the browser-side rules every response carries.

- ``Content-Security-Policy``: scripts, styles, fonts and connections from this origin only
  (Gradio needs inline scripts and styles, and ``eval`` for the page's own ``js``), images from
  here or ``data:`` and ``blob:`` URLs. So an answer steered by prompt injection into writing
  ``![x](http://elsewhere/track.png)`` loads nothing from elsewhere: nothing leaves the box.
  ``frame-ancestors 'none'`` (and ``X-Frame-Options: DENY``): no other page can frame ours to
  trick a click. ``form-action 'self'``: forms post only here.
- ``X-Content-Type-Options: nosniff``; ``Referrer-Policy: same-origin`` (our own requests keep
  their ``Referer``, which ``OriginGuard`` may check; other sites get none);
  ``Cross-Origin-Opener-Policy`` and ``Cross-Origin-Resource-Policy: same-origin`` (another
  origin cannot embed what we serve, a same-site page on another port included).
A header the app already set is kept (a route may know better).
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self' 'unsafe-inline' 'unsafe-eval'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "font-src 'self' data:",
        "media-src 'self' data: blob:",
        "connect-src 'self'",
        "worker-src 'self' blob:",
        "frame-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
HEADERS = {
    "content-security-policy": CSP,
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}


class SecurityHeaders:
    """ASGI middleware adding ``HEADERS`` to every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    if name not in headers:
                        headers[name] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)
