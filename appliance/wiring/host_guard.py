"""``HostGuard``: a request must name this box in its ``Host`` header.

A hostile page can point a name of its own at the box's address (DNS rebinding): the browser
then treats the appliance as the attacker's origin, sends it requests with
``Host: attacker.example`` and lets the page read the answers. ``OriginGuard`` compares a
request's ``Origin`` with its ``Host``, so such requests would look same-origin to it.

Rules (``host_allowed``, pure): the ``Host`` (its port aside) passes when it is
- an IP address literal (``10.0.0.5``, ``[::1]``): rebinding needs a name, never an address;
- ``localhost``;
- or listed in ``security.allowed_hosts`` (exact names, or ``.corp.example`` for a domain and
  every name under it); the installer lists the box's own host name and FQDN.
Anything else gets 400 naming the setting, before any route runs. A request without ``Host``
(HTTP/1.0 tools) passes: a browser always sends one.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send


def _hostname(host: str) -> str:
    """``Host`` without its port, lower-case; an IPv6 literal without its brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def host_allowed(host: str, allowed: Iterable[str]) -> bool:
    """Whether ``host`` (a ``Host`` header's value) names this box (see the module's rules)."""
    name = _hostname(host).rstrip(".")
    if not name:
        return False
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    if name == "localhost":
        return True
    for entry in allowed:
        entry = entry.strip().lower().rstrip(".")
        if entry == "*" or name == entry or (entry.startswith(".") and name.endswith(entry)):
            return True
        if entry.startswith(".") and name == entry[1:]:
            return True
    return False


class HostGuard:
    """ASGI middleware: a request whose ``Host`` does not name this box gets 400."""

    def __init__(self, app: ASGIApp, *, allowed_hosts: Iterable[str]) -> None:
        self.app = app
        self.allowed = tuple(allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = Headers(scope=scope).get("host")
            if host is not None and not host_allowed(host, self.allowed):
                refusal = PlainTextResponse(
                    "unknown host: add it to security.allowed_hosts to serve it", 400
                )
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)
