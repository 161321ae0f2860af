"""``OriginGuard``: no state-changing request from another origin, and no CORS for one.

A page on another port of the same host is the same *site* to a browser, so it sends the
user's ``SameSite=Lax`` session cookie along with its requests. Before this guard, Gradio
answered such origins with ``Access-Control-Allow-Credentials: true``: a page on any local port
could create an API key through the chat page's Gradio endpoint and read it back.

Rules (``decide``, pure):
- a safe method (GET, HEAD, OPTIONS that is not a CORS preflight) passes;
- an unsafe one (POST, PUT, PATCH, DELETE...) passes when its ``Origin`` (else its
  ``Referer``'s origin) is the app's own (the ``Host`` it was sent to) or listed in
  ``security.allowed_origins``; a request with neither header passes too: browsers send
  ``Origin`` with every cross-origin unsafe request, so such a request comes from a script or
  a tool, which holds no user's cookie unless it was given one. ``Origin: null`` is refused.
- a CORS preflight passes only from a listed origin, and is answered here.
Every response loses the ``Access-Control-*`` headers that whatever answered it set; a listed
origin gets its own, with credentials.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal
from urllib.parse import urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
DEFAULT_PORTS = {"http": 80, "https": 443}
Verdict = Literal["pass", "refuse", "preflight"]


def origin_of(url: str) -> str | None:
    """``scheme://host:port`` (port always written out, host lower-case) of a URL, or None."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:  # a port that is not a number, or out of range
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or port is None:
        return None
    return f"{parts.scheme}://{parts.hostname}:{port}"


def request_origin(headers: Headers) -> str | None:
    """The origin a browser says a request comes from: ``Origin``, else ``Referer``'s.
    ``""`` when it says none that can be trusted (``Origin: null``, a malformed value)."""
    origin = headers.get("origin")
    if origin is not None:
        return origin_of(origin) or ""
    referer = headers.get("referer")
    if referer is not None:
        return origin_of(referer) or ""
    return None


def own_origin(scheme: str, headers: Headers) -> str | None:
    """The origin the request was sent to: its scheme and ``Host`` header."""
    host = headers.get("host")
    return origin_of(f"{scheme}://{host}") if host else None


def decide(
    method: str, scheme: str, headers: Headers, allowed: frozenset[str]
) -> tuple[Verdict, str | None]:
    """What to do with a request, and the origin it comes from (None: it names none)."""
    origin = request_origin(headers)
    preflight = method == "OPTIONS" and "access-control-request-method" in headers
    if preflight:
        return ("preflight" if origin in allowed else "refuse"), origin
    if method in SAFE_METHODS or origin is None:
        return "pass", origin
    if origin and (origin == own_origin(scheme, headers) or origin in allowed):
        return "pass", origin
    return "refuse", origin


def _strip_cors(headers: MutableHeaders) -> None:
    for name in [k for k in headers if k.startswith("access-control-")]:
        del headers[name]


class OriginGuard:
    """ASGI middleware applying ``decide`` to every HTTP request (see the module's rules)."""

    def __init__(self, app: ASGIApp, allowed_origins: Iterable[str] = ()) -> None:
        self.app = app
        self.allowed = frozenset(filter(None, (origin_of(o) for o in allowed_origins)))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        verdict, origin = decide(
            scope["method"], scope.get("scheme", "http"), headers, self.allowed
        )
        if verdict == "refuse":
            shown = origin or "an origin it does not name"
            response: Response = JSONResponse(
                {
                    "detail": f"cross-origin request refused: {shown} is not this site "
                    "(an administrator can allow an origin in security.allowed_origins)"
                },
                403,
            )
            await response(scope, receive, send)
            return
        if verdict == "preflight":
            response = Response(status_code=204, headers=self._cors(headers, origin or ""))
            response.headers["access-control-allow-methods"] = "GET, POST, PUT, PATCH, DELETE"
            requested = headers.get("access-control-request-headers")
            if requested:
                response.headers["access-control-allow-headers"] = requested
            response.headers["access-control-max-age"] = "600"
            await response(scope, receive, send)
            return
        listed = origin if origin in self.allowed else None

        async def send_without_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                out = MutableHeaders(scope=message)
                _strip_cors(out)
                if listed:
                    out.update(self._cors(headers, listed))
                out.add_vary_header("Origin")
            await send(message)

        await self.app(scope, receive, send_without_cors)

    @staticmethod
    def _cors(headers: Headers, origin: str) -> dict[str, str]:
        # the origin exactly as the browser sent it (the normalised form has the port)
        return {
            "access-control-allow-origin": headers.get("origin", origin),
            "access-control-allow-credentials": "true",
            "vary": "Origin",
        }
