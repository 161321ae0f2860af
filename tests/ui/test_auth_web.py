"""Browser sign-in in-process: the login form (Korean or English), the session cookie that
Gradio trusts, throttling on the form, logout and expiry (real SQLite and a real Gradio app)."""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path

import gradio as gr
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from appliance.core.auth.service import AuthService
from appliance.core.auth.throttle import ThrottlePolicy
from appliance.core.db.session import Database
from ui.login.routes import SESSION_COOKIE, gradio_user, install_login

PAGE = {"accept": "text/html"}


@contextmanager
def _site(tmp_path: Path, session_hours: float):  # noqa: ANN202
    db = Database(f"sqlite:///{tmp_path / 'web.db'}")
    db.migrate()
    auth = AuthService(db, session_hours, ThrottlePolicy(max_failures=2, backoff_s=60))
    auth.create_user("hana", "right-password")
    app = FastAPI()
    install_login(app, auth)
    with gr.Blocks() as page:
        gr.Markdown("signed in")
    app = gr.mount_gradio_app(app, page, path="/", auth_dependency=gradio_user(auth))
    with TestClient(app, follow_redirects=False) as client:
        yield client, auth
    db.dispose()


@pytest.fixture()
def site(tmp_path: Path):  # noqa: ANN201
    with _site(tmp_path, 1.0) as made:
        yield made


@pytest.fixture()
def short_site(tmp_path: Path):  # noqa: ANN201
    """Sessions of two seconds: long enough for a sign-in and one page on a loaded box (one
    second was not, in CI), short enough to wait out."""
    with _site(tmp_path, 2 / 3600) as made:
        yield made


def test_sign_in_and_out(site) -> None:  # noqa: ANN001
    client, _auth = site
    first = client.get("/", headers=PAGE)
    assert first.status_code == 303 and first.headers["location"] == "/login?next=/"
    assert client.get("/config").status_code == 401  # API-style calls keep their 401
    english = client.get("/login", headers={"accept-language": "en-US,en;q=0.9"})
    assert 'lang="en"' in english.text and "Sign in" in english.text
    korean = client.get("/login?lang=ko")
    assert 'lang="ko"' in korean.text and "로그인" in korean.text
    bad = client.post("/login", data={"username": "hana", "password": "nope", "lang": "ko"})
    assert bad.status_code == 401 and "올바르지 않습니다" in bad.text
    evil = {"username": "hana", "password": "right-password", "next": "//evil.example/"}
    ok = client.post("/login", data=evil)
    assert ok.status_code == 303 and ok.headers["location"] == "/"  # no open redirect
    assert "httponly" in ok.headers["set-cookie"].lower()
    assert client.get("/", headers=PAGE).status_code == 200
    assert client.get("/logout", headers=PAGE).status_code == 200  # it only asks
    assert client.get("/", headers=PAGE).status_code == 200
    assert client.post("/logout").headers["location"] == "/login?reason=signed_out"
    assert client.get("/", headers=PAGE).status_code == 303


def test_an_expired_session_is_refused_and_says_why(short_site) -> None:  # noqa: ANN001
    client, _auth = short_site
    client.get("/login?lang=ko")  # the language the expiry notice comes back in
    client.post("/login", data={"username": "hana", "password": "right-password"})
    assert client.get("/", headers=PAGE).status_code == 200
    token = client.cookies[SESSION_COOKIE]
    time.sleep(2.2)  # past the session (and the cookie's Max-Age)
    assert client.get("/", headers=PAGE).status_code == 303
    # a browser that kept the old cookie anyway: the server refuses it and says why
    client.cookies.set(SESSION_COOKIE, token)
    expired = client.get("/", headers=PAGE)
    assert expired.status_code == 303 and "reason=expired" in expired.headers["location"]
    login = client.get(expired.headers["location"])
    assert "세션이 만료되었습니다" in login.text  # in the language chosen earlier


def test_the_form_says_when_it_backs_off(site) -> None:  # noqa: ANN001
    client, _auth = site
    wrong = {"username": "hana", "password": "wrong-password"}
    assert client.post("/login", data=wrong).status_code == 401
    assert client.post("/login", data=wrong).status_code == 401
    right = client.post("/login", data={**wrong, "password": "right-password"})
    assert right.status_code == 429 and "Try again in 60 seconds" in right.text
    assert right.headers["retry-after"] == "60"
