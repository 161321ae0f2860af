"""The fixtures of the chat page tests, package-scoped: one server pair (``appliance
engine-server``, the embedded engine behind SGLang's HTTP API, and ``appliance serve`` talking
to it through the SGLang client, so the engine can really go down mid-session), one Chromium,
and one signed-in admin page for all the files of this package."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.browser import chromium
from support.servers import CliProcess, free_port

from .chat_site import SCREENSHOTS, Site, open_page, sign_in


@pytest.fixture(scope="package")
def site(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> Iterator[Site]:
    data = tmp_path_factory.mktemp("chat-ui")
    engine_port, port = free_port(), free_port()
    engine_config = data / "engine.toml"
    engine_config.write_text(
        f'[paths]\ndata_dir = "{data / "engine"}"\n'
        f'[engine]\nmodel_path = "{model_dir}"\nkv_budget_tokens = 16384\n',
        encoding="utf-8",
    )
    config = data / "appliance.toml"
    tokens = 64 if SCREENSHOTS else 12  # fuller answers for the pictures in docs/
    config.write_text(
        f'[paths]\ndata_dir = "{data}"\n[server]\nport = {port}\n'
        f'[engine]\nbackend = "sglang"\nsglang_url = "http://127.0.0.1:{engine_port}"\n'
        f'model_path = "{model_dir}"\nmax_new_tokens = {tokens}\nrequest_timeout_s = 60\n'
        # the CPU profile's default is extractive; these tests stream the model's text (and
        # test_safeguards.py the extractive answer with "Write an answer")
        '[chat]\nanswer_mode = "grounded"\n',
        encoding="utf-8",
    )
    site = Site(f"http://127.0.0.1:{port}", data, engine_config, engine_port, "", None)  # type: ignore[arg-type]
    site.start_engine()
    server = CliProcess(["--config", str(config), "serve"])
    try:
        server.wait_for(f"{site.base}/health", (200,))
        match = re.search(r"First admin account created: admin / (\S+)", "".join(server.log))
        assert match, "the first admin's password is printed once at first start"
        site.admin_password = match.group(1)
        yield site
    finally:
        server.stop()
        site.engine.stop()


@pytest.fixture(scope="package")
def browser(site: Site):  # noqa: ANN201
    """The one Chromium (one sync Playwright per process) of the package's tests."""
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="package")
def admin_page(browser, site: Site):  # noqa: ANN001, ANN201
    page = open_page(browser, site, "en-US")
    # a wrong password first: the form says so, in English, and keeps the username
    page.goto(site.base + "/")
    page.locator("#username").fill("admin")
    page.locator("#password").fill("not-the-password")
    page.locator("#login").click()
    assert "Wrong username or password" in page.locator(".msg").inner_text()
    sign_in(page, site, "admin", site.admin_password)
    yield page
    page.context.close()
