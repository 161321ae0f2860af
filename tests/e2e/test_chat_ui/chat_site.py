"""What the chat page tests share: the running site (``appliance serve`` and its
``engine-server``), the questions they ask, and the page helpers."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import httpx
from support.servers import CliProcess

SCREENSHOTS = os.environ.get("TEST_SCREENSHOT_DIR")  # set to refresh docs/ pictures
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
VPN_Q = "How do I reset my VPN password?"
KOREAN_Q = "VPN 비밀번호는 어떻게 재설정하나요? (한글 입력 확인 ✓)"
TURN_MS = 300_000  # one answer on a busy 2-core machine, at most


@dataclass
class Site:
    """The running appliance at ``base``; ``engine`` can be stopped and started again, and
    ``external`` collects every request a page sent to another host."""

    base: str
    data: Path
    engine_config: Path
    engine_port: int
    admin_password: str
    engine: CliProcess
    external: list[str] = field(default_factory=list)

    def start_engine(self) -> None:
        self.engine = CliProcess(
            ["--config", str(self.engine_config), "engine-server", "--port", str(self.engine_port)]
        )
        self.engine.wait_for(f"http://127.0.0.1:{self.engine_port}/health", (200,))

    def db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.data / "appliance.db")


def open_page(browser, site: Site, locale: str):  # noqa: ANN001, ANN201
    """A fresh browser context in ``locale`` that records every request leaving the box."""
    context = browser.new_context(locale=locale, viewport={"width": 1360, "height": 940})
    page = context.new_page()

    def record(request) -> None:  # noqa: ANN001
        host = urlparse(request.url).hostname
        if host and host not in LOCAL_HOSTS:
            site.external.append(request.url)

    page.on("request", record)
    return page


@contextlib.contextmanager
def admin_settings(site: Site, changes: dict) -> Iterator[None]:
    """Chat settings changed through the admin API for the block, then put back."""
    token = httpx.post(
        f"{site.base}/api/login", json={"username": "admin", "password": site.admin_password}
    ).json()["token"]
    url, headers = f"{site.base}/api/admin/settings", {"authorization": f"Bearer {token}"}
    before = httpx.get(url, headers=headers).json()
    assert httpx.put(url, json=changes, headers=headers).status_code == 200
    try:
        yield
    finally:
        restore = {key: before[key] for key in changes}
        assert httpx.put(url, json=restore, headers=headers).status_code == 200


def sign_in(page, site: Site, username: str, password: str) -> None:  # noqa: ANN001
    """Sign in on the login form the site shows a page without a session."""
    page.goto(site.base + "/")
    assert urlparse(page.url).path == "/login"  # no session: the login form
    page.locator("#username").fill(username)
    page.locator("#password").fill(password)
    page.locator("#login").click()
    page.locator("#question textarea").wait_for(timeout=60_000)


def metric(page, name: str) -> str:  # noqa: ANN001
    """The text of the answer panel's row ``name`` (ttft, hit, prompt, itl, ...)."""
    return page.locator(f"#panel tr[data-metric='{name}'] td").inner_text()
