"""End to end: ``appliance serve`` as a real process on a free port, asked over HTTP.
(The chat page in headless Chromium: ``test_chat_ui/``.)"""

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
from support.servers import free_port


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
        f'[engine]\nmodel_path = "{model_dir}"\nmax_new_tokens = 24\n'
        # the CPU profile's default is extractive: this test streams the model's text
        '[chat]\nanswer_mode = "grounded"\n',
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


def test_sign_in_sets_an_expiring_session_cookie_and_logout_ends_it(server: Server) -> None:
    page = {"accept": "text/html"}
    with httpx.Client(base_url=server.base, timeout=60) as web:
        first = web.get("/", headers=page)
        assert first.status_code == 303 and first.headers["location"] == "/login?next=/"
        korean = web.get("/login", headers={"accept-language": "ko-KR,ko;q=0.9,en;q=0.5"})
        assert "로그인" in korean.text and 'lang="ko"' in korean.text
        wrong = web.post("/login", data={"username": "admin", "password": "nope-nope-nope"})
        assert wrong.status_code == 401 and "Wrong username or password" in wrong.text
        ok = web.post("/login", data={"username": "admin", "password": server.admin_password})
        assert ok.status_code == 303 and ok.headers["location"] == "/"
        cookie = ok.headers["set-cookie"]
        assert "HttpOnly" in cookie and "Max-Age=" in cookie
        assert web.get("/", headers=page).status_code == 200  # the chat page itself
        token = web.cookies["appliance_session"]
        web.post("/logout")
        assert web.get("/", headers=page).status_code == 303
    # the session ended on the server: the old token no longer works anywhere
    assert (
        httpx.get(
            f"{server.base}/api/me", headers={"authorization": f"Bearer {token}"}, timeout=30
        ).status_code
        == 401
    )
