"""Headless Chromium for the browser tests: Debian's build (playwright's own download cannot
work air-gapped), launched the same way by every module that drives a page."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def need_chromium() -> None:
    """Skip the test, saying why, where Chromium is not installed."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched headless Chromium (a playwright ``Browser``), closed on exit."""
    need_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=list(ARGS))
        try:
            yield browser
        finally:
            browser.close()
