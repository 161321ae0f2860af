"""``ProxyHeaders``: the client address and scheme of each request, behind trusted proxies.

Uvicorn is run with its own ``proxy_headers`` off (it would believe ``X-Forwarded-For`` from
127.0.0.1 by default), so this is the one place that decides. For a request whose direct peer
is one of ``security.trusted_proxies``, the ASGI scope's ``client`` becomes the client that
``X-Forwarded-For`` names by the rule of ``appliance.core.auth.client_address`` and its
``scheme`` follows ``X-Forwarded-Proto``; any other request is passed on untouched (its headers
are ignored). It is the web app's outermost middleware (``build_web_app``), so every reader
agrees: the login and API-key throttles, the audit log, the origin check, the secure cookie.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from appliance.core.auth.client_address import TrustedProxies

_WEBSOCKET = {"http": "ws", "https": "wss"}


class ProxyHeaders:
    """ASGI middleware: a trusted proxy's forwarded client address and scheme into the scope."""

    def __init__(self, app: ASGIApp, trusted: TrustedProxies) -> None:
        self.app = app
        self.trusted = trusted

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        peer = scope.get("client")
        if scope["type"] in ("http", "websocket") and peer and self.trusted.trusts(peer[0]):
            headers = Headers(scope=scope)
            client = self.trusted.client(peer[0], headers.getlist("x-forwarded-for"))
            scope = {**scope, "client": (client, peer[1] if client == peer[0] else 0)}
            given = "https" if scope.get("scheme") in ("https", "wss") else "http"
            said = self.trusted.scheme(peer[0], headers.getlist("x-forwarded-proto"), given)
            if said != given:
                scope["scheme"] = said if scope["type"] == "http" else _WEBSOCKET[said]
        await self.app(scope, receive, send)
