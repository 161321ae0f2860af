"""Cross-origin writes with the user's cookie (issue #22, item 1).

A page on another port of the same host is the same *site* to the browser, which sends it the
session cookie. Before the fix, Gradio answered any ``http://127.0.0.1:<port>`` origin with
``Access-Control-Allow-Credentials: true``: such a page created an API key through the chat
page's Gradio endpoint and read it back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import urlparse

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from support.servers import serving

PASSWORD = "password-789"


class Hostile:
    """A page on another loopback port: it serves ``html`` and records what it is sent."""

    def __init__(self) -> None:
        self.html = "<!doctype html><p>hi</p>"
        self.hits: list[str] = []

        async def page(request: Request) -> Response:
            self.hits.append(request.url.path)
            if request.url.path == "/":
                return HTMLResponse(self.html)
            return Response(b"", 204)

        self.app = Starlette(routes=[Route("/{path:path}", page, methods=["GET", "POST"])])


@pytest.fixture(scope="module")
def hostile() -> Iterator[tuple[Hostile, str]]:
    h = Hostile()
    with serving(h.app) as base:
        yield h, base


def _create_key_endpoint(site) -> str:  # noqa: ANN001
    """The chat page's Gradio endpoint that creates an API key for the signed-in user."""
    with httpx.Client(base_url=site.base, timeout=30) as http:
        http.post("/login", data={"username": "alice", "password": PASSWORD})
        names = http.get("/gradio_api/info").json()["named_endpoints"]
    (name,) = [n for n in names if n.strip("/") == "create"]
    return name


def test_a_page_on_another_port_cannot_create_or_read_an_api_key(
    site,
    browser,
    hostile,  # noqa: ANN001
) -> None:
    """The attack of the issue, in the real browser: signed in at the appliance, the user
    opens a page on another local port that posts to the chat page's key endpoint with the
    user's cookie, both as a credentialed CORS call (to read the key back) and as a
    ``no-cors`` one (blind). Neither creates a key, and the page reads nothing."""
    h, evil = hostile
    endpoint = _create_key_endpoint(site)
    alice = site.auth.principal_for("alice")
    before = len(site.auth.api_keys.list(alice))
    context = browser.new_context()
    page = context.new_page()
    page.goto(site.base + "/login")
    page.locator("#username").fill("alice")
    page.locator("#password").fill(PASSWORD)
    page.locator("#login").click()
    page.locator("#question textarea").wait_for(timeout=60_000)
    assert any(c["name"] == "appliance_session" for c in context.cookies())

    page.goto(evil + "/")
    url = f"{site.base}/gradio_api/call{endpoint}"
    result = page.evaluate(
        """async ([url, body]) => {
            const out = {};
            try {
                const r = await fetch(url, {method: 'POST', credentials: 'include',
                    headers: {'content-type': 'application/json'}, body});
                out.cors = r.status + ' ' + (await r.text());
            } catch (e) { out.cors = 'blocked: ' + e; }
            try {
                await fetch(url, {method: 'POST', mode: 'no-cors', credentials: 'include',
                    headers: {'content-type': 'text/plain'}, body});
                out.blind = 'sent';
            } catch (e) { out.blind = 'blocked: ' + e; }
            return out;
        }""",
        [url, json.dumps({"data": ["stolen", "en"]})],
    )
    context.close()
    assert result["cors"].startswith("blocked"), result  # nothing readable came back
    assert len(site.auth.api_keys.list(alice)) == before, "a cross-origin call made a key"


@pytest.mark.parametrize(
    "path",
    [
        "/login",
        "/logout",
        "/api/chat",
        "/api/admin/users",
        "/v1/chat/completions",
        "/gradio_api/call/create",
        "/admin/gradio_api/upload",
    ],
)
def test_unsafe_requests_from_another_origin_are_refused(site, path: str) -> None:  # noqa: ANN001
    """Origin (or, without it, Referer) naming another port, or ``null``: 403 before the route
    runs, whatever it is (sign-in form, API, Gradio)."""
    port = urlparse(site.base).port
    for headers in (
        {"origin": f"http://127.0.0.1:{port + 1}"},
        {"origin": f"http://localhost:{port}"},  # another host name is another origin
        {"origin": "null"},
        {"referer": f"http://127.0.0.1:{port + 1}/page"},
    ):
        r = httpx.post(site.base + path, data={"username": "alice"}, headers=headers)
        assert r.status_code == 403, (path, headers, r.status_code)
        assert "cross-origin request refused" in r.json()["detail"]


def test_same_origin_and_originless_requests_still_work(site) -> None:  # noqa: ANN001
    """The app's own pages (Origin = the host they were loaded from) and tools that send no
    Origin at all (curl, scripts) are not affected."""
    form = {"username": "alice", "password": PASSWORD}
    own = httpx.post(site.base + "/login", data=form, headers={"origin": site.base})
    assert own.status_code == 303
    assert httpx.post(site.base + "/login", data=form).status_code == 303
    api = httpx.post(site.base + "/api/login", json=form, headers={"referer": site.base + "/"})
    assert api.status_code == 200


def test_no_cors_headers_for_an_origin_that_is_not_allowed(site) -> None:  # noqa: ANN001
    """Neither a preflight nor a plain answer gives another origin credentials."""
    port = urlparse(site.base).port
    other = f"http://127.0.0.1:{port + 1}"
    preflight = httpx.options(
        site.base + "/gradio_api/call/create",
        headers={"origin": other, "access-control-request-method": "POST"},
    )
    assert preflight.status_code == 403
    assert "access-control-allow-origin" not in preflight.headers
    for path in ("/gradio_api/info", "/login", "/health", "/gradio_api/config"):
        r = httpx.get(site.base + path, headers={"origin": other})
        assert "access-control-allow-origin" not in r.headers, path
        assert "access-control-allow-credentials" not in r.headers, path


def test_an_allowed_origin_gets_cors_with_credentials(own_site) -> None:  # noqa: ANN001
    """``security.allowed_origins`` opens the app to a named intranet origin, and only it."""
    friend = "https://portal.example.internal"
    with own_site(security={"allowed_origins": [friend]}) as s:
        preflight = httpx.options(
            s.base + "/api/login",
            headers={
                "origin": friend,
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type",
            },
        )
        assert preflight.status_code == 204
        assert preflight.headers["access-control-allow-origin"] == friend
        assert preflight.headers["access-control-allow-credentials"] == "true"
        form = {"username": "alice", "password": PASSWORD}
        r = httpx.post(s.base + "/api/login", json=form, headers={"origin": friend})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == friend
        stranger = httpx.post(
            s.base + "/api/login", json=form, headers={"origin": "https://evil.example"}
        )
        assert stranger.status_code == 403
