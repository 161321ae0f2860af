"""``ProxyHeaders`` at the edge: a trusted proxy's forwarded client and scheme go into the ASGI
scope, anyone else's forwarding headers are ignored; and ``appliance serve`` runs uvicorn with
its own proxy-header trust off, so that the app alone decides."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import httpx
import pytest

from appliance.core.auth.client_address import TrustedProxies
from appliance.core.config import load_config
from appliance.wiring.proxy_headers import ProxyHeaders


async def _echo(scope, receive, send) -> None:  # noqa: ANN001
    """An ASGI app answering with what its scope says of the client."""
    body = f"{scope['client'][0]} {scope['scheme']}".encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


def _seen(app, peer: str, headers: dict[str, str]) -> str:  # noqa: ANN001
    async def call() -> str:
        transport = httpx.ASGITransport(app=app, client=(peer, 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            return (await client.get("/", headers=headers)).text

    return asyncio.run(call())


TRUSTED = ProxyHeaders(_echo, TrustedProxies.parse(["127.0.0.1"]))
FORWARDED = {"x-forwarded-for": "6.6.6.6, 203.0.113.5", "x-forwarded-proto": "https"}


def test_a_trusted_proxy_sets_the_client_and_the_scheme() -> None:
    assert _seen(TRUSTED, "127.0.0.1", FORWARDED) == "203.0.113.5 https"
    assert _seen(TRUSTED, "127.0.0.1", {"x-forwarded-for": "junk"}) == "127.0.0.1 http"


def test_anyone_else_is_the_client_and_keeps_the_scheme() -> None:
    assert _seen(TRUSTED, "127.0.0.2", FORWARDED) == "127.0.0.2 http"


def test_without_trusted_proxies_nothing_is_trusted() -> None:
    security = load_config(environ={}).security
    assert not TrustedProxies.parse(security.trusted_proxies)


def test_appliance_serve_turns_uvicorns_proxy_headers_off(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    import appliance.wiring.appliance as wiring_appliance
    import appliance.wiring.web as wiring_web
    from appliance.cli.serving import serve

    closed: list[bool] = []
    built = SimpleNamespace(first_admin_password=None, close=lambda: closed.append(True))
    runs: list[tuple[object, dict]] = []
    monkeypatch.setattr(wiring_appliance, "build_appliance", lambda config: built)
    monkeypatch.setattr(wiring_web, "build_web_app", lambda appliance: _echo)
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: runs.append((app, kw)))
    config = load_config(environ={}, overrides={"security": {"trusted_proxies": ["10.0.0.1"]}})
    assert serve(config) == 0
    ((app, options),) = runs
    assert options["proxy_headers"] is False and closed == [True]
    assert app is _echo  # the web app wraps itself in ProxyHeaders (``build_web_app``)
