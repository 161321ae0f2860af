"""Security headers (issue #22, item 8): a CSP that Gradio works under, framing refused,
``nosniff`` and a referrer policy, on every answer; the chat and admin pages still work in the
real browser with no policy violation, and a remote image (what an answer steered by prompt
injection would write) is not loaded."""

from __future__ import annotations

import html
from collections.abc import Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from support.servers import serving

PASSWORD = "password-789"
EXPECTED = {
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}


@pytest.fixture(scope="module")
def tracker() -> Iterator[tuple[list[str], str]]:
    """Another origin that records every request it gets (the 'remote tracking image')."""
    hits: list[str] = []

    async def pixel(request: Request) -> Response:
        if request.url.path == "/frame":  # a page that frames ?src=
            src = html.escape(request.query_params["src"])
            return HTMLResponse(f"<iframe id=f src='{src}' width=400 height=300></iframe>")
        hits.append(request.url.path)
        return Response(b"GIF89a", media_type="image/gif")

    with serving(Starlette(routes=[Route("/{p:path}", pixel)])) as base:
        yield hits, base


def test_every_answer_carries_the_headers(site) -> None:  # noqa: ANN001
    """Pages, API answers, refusals and Gradio's own routes alike."""
    for method, path in (
        ("GET", "/login"),
        ("GET", "/health"),
        ("GET", "/api/conversations"),  # a 401
        ("GET", "/gradio_api/info"),
        ("GET", "/admin/"),  # a redirect to the sign-in form
        ("POST", "/api/login"),  # a 422
    ):
        r = httpx.request(method, site.base + path)
        for name, value in EXPECTED.items():
            assert r.headers.get(name) == value, (path, name)
        csp = r.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "img-src 'self' data: blob:" in csp, path
        assert "connect-src 'self'" in csp and "default-src 'self'" in csp, path


def _watch(page) -> list[str]:  # noqa: ANN001
    """Every CSP violation the page reports (the console, and the DOM's own event)."""
    violations: list[str] = []
    page.on(
        "console",
        lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None,
    )
    page.add_init_script(
        "document.addEventListener('securitypolicyviolation', e => console.error("
        "'Content Security Policy violation: ' + e.violatedDirective + ' ' + e.blockedURI));"
    )
    return violations


def test_chat_and_admin_pages_work_under_the_policy(site, browser, tracker) -> None:  # noqa: ANN001
    """Signed in as an admin: the chat page answers a question and the console opens its tabs,
    with no violation; an image from another origin put into the page is refused and the
    other origin never hears of it."""
    from playwright.sync_api import expect

    hits, remote = tracker
    context = browser.new_context()
    page = context.new_page()
    violations = _watch(page)
    page.goto(site.base + "/")
    page.locator("#username").fill("root")
    page.locator("#password").fill(PASSWORD)
    page.locator("#login").click()
    page.locator("#question textarea").fill("How often is the aquarium glass cleaned?")
    page.locator("#send").click()
    expect(page.locator("#sources")).to_contain_text("aquarium", timeout=120_000)
    expect(page.locator("#question textarea")).to_have_value("", timeout=120_000)
    assert not violations, violations

    page.evaluate(
        "src => { const i = document.createElement('img'); i.src = src;"
        " document.body.appendChild(i); }",
        remote + "/track.png",
    )
    page.wait_for_timeout(1500)
    assert hits == [], "the remote image was fetched"
    assert any("img-src" in v for v in violations), violations
    violations.clear()

    admin = context.new_page()
    admin_violations = _watch(admin)
    admin.goto(site.base + "/admin/")
    expect(admin.locator("#admin-who")).to_contain_text("Signed in as root", timeout=60_000)
    admin.get_by_role("tab", name="Settings").click()
    expect(admin.locator("#save-settings")).to_be_visible(timeout=30_000)
    assert not admin_violations, admin_violations
    context.close()


def test_no_other_page_can_frame_the_chat(site, browser, tracker) -> None:  # noqa: ANN001
    """A page elsewhere that frames the sign-in form gets an empty frame."""
    _hits, remote = tracker
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{remote}/frame?src={site.base}/login", wait_until="domcontentloaded")
    page.wait_for_timeout(3000)
    frame = page.frame_locator("#f")
    assert frame.locator("#username").count() == 0
    context.close()
