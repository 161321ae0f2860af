"""End to end: ``appliance serve`` as a real process on a free port, asked over HTTP and
driven in headless Chromium."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from servers import free_port

CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = os.environ.get("TEST_SCREENSHOT_DIR")  # set to refresh docs/ pictures


class Server:
    def __init__(self, base: str, admin_password: str, log: list[str]) -> None:
        self.base = base
        self.admin_password = admin_password
        self.log = log


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("served")
    port = free_port()
    config = data / "appliance.toml"
    config.write_text(
        f'[paths]\ndata_dir = "{data}"\n'
        f"[server]\nport = {port}\n"
        f'[engine]\nmodel_path = "{model_dir}"\nmax_new_tokens = 24\n',
        encoding="utf-8",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "appliance.cli", "--config", str(config), "serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")},
            "PYTHONUNBUFFERED": "1",
        },
    )
    log: list[str] = []
    reader = threading.Thread(target=lambda: log.extend(proc.stdout), daemon=True)
    reader.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 300
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail("server exited:\n" + "".join(log))
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline:
                pytest.fail("server did not become healthy:\n" + "".join(log))
            time.sleep(0.5)
        match = re.search(r"First admin account created: admin / (\S+)", "".join(log))
        assert match, "the first admin's password is printed once at first start"
        yield Server(base, match.group(1), log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def stream_turn(base: str, token: str, question: str, conv: int | None = None) -> list[dict]:
    body = {"question": question, "conversation_id": conv}
    headers = {"authorization": f"Bearer {token}"}
    events = []
    with httpx.stream("POST", f"{base}/api/chat", json=body, headers=headers, timeout=120) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line[6:]))
    return events


def test_ask_over_http_streams_cites_and_reuses_the_prefix(server: Server) -> None:
    login = httpx.post(
        f"{server.base}/api/login",
        json={"username": "admin", "password": server.admin_password},
        timeout=60,
    )
    assert login.status_code == 200
    token = login.json()["token"]
    first = stream_turn(server.base, token, "How do I reset my VPN password?")
    assert first[0]["type"] == "retrieval"
    assert first[0]["citations"][0]["source"] == "it-vpn-access.md"
    assert sum(e["type"] == "delta" for e in first) >= 2  # streamed, not one block
    assert first[-1]["type"] == "done"
    assert first[-1]["stats"]["prompt_tokens"] > 0
    second = stream_turn(server.base, token, "How long must a VPN password be?")
    assert second[-1]["type"] == "done"
    assert second[-1]["stats"]["cached_tokens"] > 0


@pytest.mark.browser
def test_chat_page_in_a_real_browser(server: Server, tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    from playwright.sync_api import expect, sync_playwright

    shots = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(server.base + "/")
        page.get_by_label("username").fill("admin")
        page.get_by_label("password").fill(server.admin_password)
        page.get_by_role("button", name="Login").click()

        question = page.locator("#question textarea")
        expect(question).to_be_visible(timeout=30_000)
        # the page opens on the latest conversation (from the HTTP test): start a new one
        expect(page.locator("#chatbot")).to_contain_text("VPN", timeout=30_000)
        page.locator("#new-chat").click()
        expect(page.locator("#panel")).not_to_contain_text("Cached tokens")
        question.fill("How do I reset my VPN password?")
        page.locator("#send").click()
        expect(page.locator("#sources")).to_contain_text("it-vpn-access.md", timeout=60_000)
        expect(page.locator("#panel")).to_contain_text("Cached tokens", timeout=120_000)
        expect(page.locator("#panel")).to_contain_text("TTFT")
        bot = page.locator("#chatbot")
        expect(bot).to_contain_text("How do I reset my VPN password?")
        page.screenshot(path=str(shots / "chat.png"), full_page=True)
        page.locator("#panel").screenshot(path=str(shots / "panel.png"))

        # history survives a reload: the conversation is stored, not kept in the page
        page.reload()
        expect(page.locator("#chatbot")).to_contain_text(
            "How do I reset my VPN password?", timeout=30_000
        )
        expect(page.locator("#panel")).to_contain_text("Prompt tokens")
        # Korean input round-trips intact
        korean = "VPN 비밀번호는 어떻게 재설정하나요?"
        page.locator("#new-chat").click()
        expect(page.locator("#panel")).not_to_contain_text("Prompt tokens")
        page.locator("#question textarea").fill(korean)
        page.locator("#send").click()
        expect(page.locator("#panel")).to_contain_text("Cached tokens", timeout=120_000)
        expect(page.locator("#chatbot")).to_contain_text(korean)
        browser.close()
