"""Issue #22: ``GET /logout`` signed the user out, so any link or image on any page (a chat
answer, another intranet site) could sign people out. Signing out is now ``POST /logout``; a
``GET`` only shows a page with that button, and the pages' Log out buttons are forms that post.
"""

from __future__ import annotations

import secrets
from urllib.parse import urlparse

import httpx
import pytest

from appliance.bench.load_browser import open_chat

PASSWORD = "password-789"
PAGE = {"accept": "text/html"}


def _signed_in(site) -> tuple[httpx.Client, str]:  # noqa: ANN001
    """A fresh user signed in through the form: the client (holding the cookie), the token."""
    name = f"out-{secrets.token_hex(3)}"
    site.auth.create_user(name, PASSWORD)
    client = httpx.Client(base_url=site.base, timeout=60)
    assert client.post("/login", data={"username": name, "password": PASSWORD}).status_code == 303
    return client, client.cookies["appliance_session"]


def _alive(site, token: str) -> bool:  # noqa: ANN001
    me = httpx.get(f"{site.base}/api/me", headers={"authorization": f"Bearer {token}"})
    return me.status_code == 200


def test_get_logout_does_not_end_the_session(site) -> None:  # noqa: ANN001
    """A GET of /logout (a bookmark, a link, an <img>) leaves the session alive: it shows the
    question and a form that posts (before: it signed the user out)."""
    client, token = _signed_in(site)
    try:
        asked = client.get("/logout", headers=PAGE)
        assert asked.status_code == 200
        assert '<form method="post" action="/logout">' in asked.text
        assert client.get("/", headers=PAGE).status_code == 200  # still on the chat page
    finally:
        client.close()
    assert _alive(site, token)


def test_post_logout_ends_the_session(site) -> None:  # noqa: ANN001
    """POST /logout ends the session on the server and clears the cookie (before: 405)."""
    client, token = _signed_in(site)
    try:
        out = client.post("/logout")
        assert out.status_code == 303 and out.headers["location"] == "/login?reason=signed_out"
        assert client.get("/", headers=PAGE).status_code == 303  # back to the form
    finally:
        client.close()
    assert not _alive(site, token)


@pytest.mark.browser
def test_the_chat_pages_logout_button_posts_and_signs_out(site, browser) -> None:  # noqa: ANN001
    """In Chromium, the chat page's Log out button sends POST /logout (before: a link, GET)
    and the session ends."""
    name = f"out-{secrets.token_hex(3)}"
    site.auth.create_user(name, PASSWORD)
    page = open_chat(browser, site.base, name, PASSWORD)
    try:
        token = next(c["value"] for c in page.context.cookies() if c["name"] == "appliance_session")
        assert _alive(site, token)
        with page.expect_request(lambda r: urlparse(r.url).path == "/logout") as sent:
            page.locator("#logout").click()
        assert sent.value.method == "POST"
        page.wait_for_url("**/login?reason=signed_out")
        assert "You have signed out." in page.content()
        assert not _alive(site, token)
    finally:
        page.context.close()


@pytest.mark.browser
def test_the_admin_consoles_logout_button_posts_and_signs_out(site, browser) -> None:  # noqa: ANN001
    """In Chromium, the admin console's Log out button sends POST /logout too (before: a
    link, GET) and the session ends."""
    name = f"out-admin-{secrets.token_hex(3)}"
    site.auth.create_user(name, PASSWORD, role="admin")
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.goto(site.base + "/admin/")
        page.locator("#username").fill(name)
        page.locator("#password").fill(PASSWORD)
        page.locator("#login").click()
        page.locator("#admin-who").get_by_text("Signed in as").wait_for(timeout=60_000)
        token = next(c["value"] for c in context.cookies() if c["name"] == "appliance_session")
        with page.expect_request(lambda r: urlparse(r.url).path == "/logout") as sent:
            page.locator("#logout").click()
        assert sent.value.method == "POST"
        page.wait_for_url("**/login?reason=signed_out")
        assert not _alive(site, token)
    finally:
        context.close()
