"""The staff chat page in headless Chromium, against real processes: ``appliance
engine-server`` (the embedded engine behind SGLang's HTTP API) and ``appliance serve`` talking
to it through the SGLang client, so the engine can really go down mid-session.

One server pair per module; the browser tests run in order and build on each other.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest
from support.browser import chromium
from support.servers import CliProcess, free_port

pytestmark = pytest.mark.browser

SCREENSHOTS = os.environ.get("TEST_SCREENSHOT_DIR")  # set to refresh docs/ pictures
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
VPN_Q = "How do I reset my VPN password?"
KOREAN_Q = "VPN 비밀번호는 어떻게 재설정하나요? (한글 입력 확인 ✓)"
TURN_MS = 300_000  # one answer on a busy 2-core machine, at most


@dataclass
class Site:
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


@pytest.fixture(scope="module")
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
        f'model_path = "{model_dir}"\nmax_new_tokens = {tokens}\nrequest_timeout_s = 60\n',
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


@pytest.fixture(scope="module")
def browser(site: Site):  # noqa: ANN201
    with chromium() as launched:
        yield launched


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
    page.goto(site.base + "/")
    assert urlparse(page.url).path == "/login"  # no session: the login form
    page.locator("#username").fill(username)
    page.locator("#password").fill(password)
    page.locator("#login").click()
    page.locator("#question textarea").wait_for(timeout=60_000)


def metric(page, name: str) -> str:  # noqa: ANN001
    return page.locator(f"#panel tr[data-metric='{name}'] td").inner_text()


@pytest.fixture(scope="module")
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


def test_ask_streams_cites_and_shows_the_panel(admin_page, site: Site) -> None:  # noqa: ANN001
    from playwright.sync_api import expect

    page = admin_page
    expect(page.locator("#send")).to_have_text("Send")  # the browser's language: English
    page.evaluate(
        """() => { window.__changes = 0; new MutationObserver(() => window.__changes++)
        .observe(document.querySelector('#chatbot'),
                 {subtree: true, childList: true, characterData: true}); }"""
    )
    page.locator("#question textarea").fill(VPN_Q)
    page.locator("#send").click()
    expect(page.locator("#sources")).to_contain_text("it-vpn-access.md", timeout=TURN_MS)
    expect(page.locator("#panel tr[data-metric='ttft']")).to_be_visible(timeout=TURN_MS)
    assert page.evaluate("window.__changes") >= 4  # the answer arrived in pieces
    expect(page.locator("#question textarea")).to_have_value("")  # stored: the box is free
    assert re.fullmatch(r"\d+\.\d\d s", metric(page, "ttft"))
    assert re.fullmatch(r"\d+%", metric(page, "hit"))
    assert int(metric(page, "prompt").replace(",", "")) > 0
    assert re.fullmatch(r"\d+ ms", metric(page, "itl"))
    assert re.search(r"\[1\]", metric(page, "chunks"))
    assert metric(page, "ordering") != "–"
    # a numbered source opens on its title, page and the highlighted chunk text
    first = page.locator("#sources details.citation").first
    expect(first.locator("summary")).to_contain_text("[1]")
    first.locator("summary").click()
    expect(first.locator("mark.chunk")).to_be_visible()
    assert len(first.locator("mark.chunk").inner_text()) > 40

    # a follow-up in the same conversation reuses the cached prefix; the chart has two turns
    page.locator("#question textarea").fill("How long must a VPN password be?")
    page.locator("#send").click()
    expect(page.locator("#chart svg rect.ttft")).to_have_count(2, timeout=TURN_MS)
    assert int(metric(page, "hit").rstrip("%")) > 0
    expect(page.locator("#conversations")).to_contain_text(VPN_Q)

    # thumbs down on the last answer, with a comment: stored for this user
    page.locator("#chatbot button[aria-label='Dislike']").last.click()
    expect(page.locator("#feedback-status")).to_contain_text("Thank you")
    page.locator("#feedback-comment textarea").fill("Please link the portal.")
    page.locator("#send-feedback").click()
    expect(page.locator("#feedback-comment textarea")).to_have_value("")
    with site.db() as db:
        assert db.execute("SELECT rating, comment FROM feedback").fetchall() == [
            (-1, "Please link the portal.")
        ]

    shots = Path(SCREENSHOTS) if SCREENSHOTS else site.data
    page.screenshot(path=str(shots / "chat.png"), full_page=True)
    page.locator("#answer-panel").screenshot(path=str(shots / "panel.png"))

    # history survives a reload: it is stored, not kept in the page
    page.reload()
    expect(page.locator("#chatbot")).to_contain_text(VPN_Q, timeout=60_000)
    expect(page.locator("#chart svg rect.ttft")).to_have_count(2)


def test_a_citation_in_the_answer_opens_its_source(admin_page, site: Site) -> None:  # noqa: ANN001
    """An answer's [n] is a link: a click opens source n in the list and scrolls to it. The
    small model cites when it likes, so the stored answer is given a citation first."""
    from playwright.sync_api import expect

    page = admin_page
    with site.db() as db:
        msg_id, citations = db.execute(
            "SELECT id, citations FROM messages WHERE role='assistant' ORDER BY id DESC LIMIT 1"
        ).fetchone()
        number = max(c["number"] for c in json.loads(citations))
        db.execute(
            "UPDATE messages SET content = content || ? WHERE id = ?", (f" See [{number}].", msg_id)
        )
    page.reload()
    entry = page.locator(f"#sources details#source-{number}")
    expect(entry).to_have_count(1, timeout=60_000)
    assert entry.get_attribute("open") is None  # closed until asked for
    link = page.locator(f"#chatbot a[href='#source-{number}']").last
    expect(link).to_have_text(f"[{number}]")
    link.click()
    expect(entry).to_have_attribute("open", "")
    expect(entry.locator("mark.chunk")).to_be_visible()
    assert urlparse(page.url).path == "/"  # the link opened the source, not a new page


def test_regenerate_stop_rename_delete(admin_page, site: Site) -> None:  # noqa: ANN001
    from playwright.sync_api import expect

    page = admin_page
    with site.db() as db:
        (old,) = db.execute("SELECT max(id) FROM messages WHERE role='assistant'").fetchone()
    page.locator("#regenerate").click()
    expect(page.locator("#chart svg rect.ttft")).to_have_count(2, timeout=TURN_MS)
    deadline = time.time() + 120
    while True:  # the new answer replaces the old one in the database
        with site.db() as db:
            rows = db.execute("SELECT id FROM messages WHERE role='assistant'").fetchall()
        if old not in [r[0] for r in rows]:
            break
        assert time.time() < deadline, "regenerate did not replace the last answer"
        time.sleep(0.5)
    assert len(rows) == 2

    # Stop: the partial answer is not stored, the question stays in the box. The answer may run
    # long for this turn, so that it is still streaming when Stop lands: a 12-token answer can
    # finish before the click reaches the server
    with admin_settings(site, {"max_new_tokens": 400}):
        page.locator("#question textarea").fill("Describe the onboarding week in detail.")
        page.locator("#send").click()
        page.locator("#stop").click()
        expect(page.locator("#chatbot")).to_contain_text("Stopped", timeout=30_000)
        expect(page.locator("#question textarea")).to_have_value(
            "Describe the onboarding week in detail."
        )

    page.locator("#manage").click()
    page.locator("#rename-box textarea, #rename-box input").first.fill("VPN questions")
    page.locator("#rename").click()
    expect(page.locator("#conversations")).to_contain_text("VPN questions")
    page.locator("#new-chat").click()
    expect(page.locator("#question textarea")).to_have_value("")


@pytest.mark.xfail(
    reason="on this 2-core machine the Enter turn after the Stop test sometimes never finishes "
    "(seen on the commit before the hardening work too; passes on a quiet machine): open",
    strict=False,
)
def test_enter_sends_and_continue_grows_a_cut_answer(admin_page, site: Site) -> None:  # noqa: ANN001
    """Enter sends and Shift+Enter starts a new line; the Enter that confirms an IME
    composition (a Korean syllable) does not send. An answer cut at the length limit says so,
    and Continue goes on with that answer: it grows in place, streamed."""
    from playwright.sync_api import expect

    page = admin_page
    # a fresh page (a new Gradio session: nothing of the last test's stopped turn is in it),
    # on a new chat: no reply is on its way, so nothing clears the box
    page.goto(site.base + "/")
    page.locator("#question textarea").wait_for(timeout=60_000)
    page.locator("#new-chat").click()
    expect(page.locator("#sources")).to_contain_text("No sources yet", timeout=30_000)
    box, chat = page.locator("#question textarea"), page.locator("#chatbot")
    box.fill("Where is the IT helpdesk?")
    box.press("End")
    box.press("Shift+Enter")
    box.press_sequentially("Thanks.")
    expect(box).to_have_value("Where is the IT helpdesk?\nThanks.")
    # a composing Enter (as a Korean IME sends it to confirm a syllable) is not a send
    box.evaluate(
        """(el) => { for (const type of ['keydown', 'keypress']) el.dispatchEvent(
            new KeyboardEvent(type, {key: 'Enter', isComposing: true, bubbles: true})); }"""
    )
    page.wait_for_timeout(1500)
    expect(box).to_have_value("Where is the IT helpdesk?\nThanks.")
    expect(chat).not_to_contain_text("Thanks.")
    with admin_settings(site, {"max_new_tokens": 6}):
        box.press("Enter")
        expect(box).to_have_value("", timeout=TURN_MS)  # sent, answered and stored
        expect(chat).to_contain_text("Thanks.")
        expect(page.locator("#cut-note")).to_contain_text("cut at the length limit")
        with site.db() as db:
            msg_id, before = db.execute(
                "SELECT id, content FROM messages WHERE role='assistant' ORDER BY id DESC LIMIT 1"
            ).fetchone()
        tokens, shown = int(metric(page, "answer")), len(chat.inner_text())
        page.locator("#continue").click()
        expect(page.locator("#continue")).to_be_hidden()  # while it streams
        expect(page.locator("#panel tr[data-metric='answer'] td")).not_to_have_text(
            str(tokens), timeout=TURN_MS
        )
    assert int(metric(page, "answer")) > tokens  # the panel counts the whole answer
    with site.db() as db:
        (after,) = db.execute("SELECT content FROM messages WHERE id = ?", (msg_id,)).fetchone()
        (answers,) = db.execute(
            "SELECT count(*) FROM messages m JOIN messages q ON q.conversation_id = "
            "m.conversation_id WHERE m.id = ? AND q.role = 'assistant'",
            (msg_id,),
        ).fetchone()
    assert after.startswith(before) and len(after) > len(before)  # the same answer, grown
    assert answers == 1
    assert len(chat.inner_text()) > shown  # and the chat shows it grown
    page.locator("#new-chat").click()  # the next tests start on a new chat, as this one did
    expect(page.locator("#sources")).to_contain_text("No sources yet")


def test_korean_ui_and_input_round_trip(browser, site: Site) -> None:  # noqa: ANN001
    """A Korean browser gets the Korean login and chat page; Korean text is stored and shown
    exactly; the language switch changes the words; another user sees none of admin's."""
    from playwright.sync_api import expect

    from appliance.core.auth.service import AuthService
    from appliance.core.db.session import Database

    db = Database(f"sqlite:///{site.data / 'appliance.db'}")
    AuthService(db, 1).create_user("minji", "password-123")
    db.dispose()

    page = open_page(browser, site, "ko-KR")
    page.goto(site.base + "/")
    expect(page.locator("#login")).to_have_text("로그인")
    sign_in(page, site, "minji", "password-123")
    expect(page.locator("#send")).to_have_text("보내기")
    # another user's conversations are not listed
    expect(page.locator("#conversations")).not_to_contain_text("VPN")
    page.locator("#question textarea").fill(KOREAN_Q)
    page.locator("#send").click()
    expect(page.locator("#panel tr[data-metric='ttft']")).to_be_visible(timeout=TURN_MS)
    expect(page.locator("#chatbot")).to_contain_text(KOREAN_Q)
    expect(page.locator("#conversations")).to_contain_text(KOREAN_Q[:20])
    with site.db() as conn:
        stored = [r[0] for r in conn.execute("SELECT content FROM messages WHERE role='user'")]
    assert KOREAN_Q in stored

    # the switch changes the words at once, and the choice survives a reload
    page.locator("#lang label", has_text="English").click()
    expect(page.locator("#send")).to_have_text("Send")
    page.reload()
    expect(page.locator("#send")).to_have_text("Send", timeout=60_000)
    expect(page.locator("#chatbot")).to_contain_text(KOREAN_Q)

    # and through the API: admin's conversations are invisible to minji
    token = httpx.post(
        f"{site.base}/api/login", json={"username": "minji", "password": "password-123"}
    ).json()["token"]
    with site.db() as conn:
        (admin_conv,) = conn.execute(
            "SELECT c.id FROM conversations c JOIN users u ON u.id = c.user_id "
            "WHERE u.username = 'admin' LIMIT 1"
        ).fetchone()
    headers = {"authorization": f"Bearer {token}"}
    assert (
        httpx.get(f"{site.base}/api/conversations/{admin_conv}", headers=headers).status_code == 404
    )
    listed = httpx.get(f"{site.base}/api/conversations", headers=headers).json()
    assert [c["title"] for c in listed] == [KOREAN_Q[:80]]
    page.locator("#logout").click()  # the header's form posts to /logout
    page.wait_for_url("**/login?reason=signed_out")
    assert httpx.get(f"{site.base}/api/me", headers=headers).status_code == 200  # API token
    page.goto(site.base + "/")
    assert urlparse(page.url).path == "/login"  # the browser session ended on the server
    page.context.close()


def test_engine_down_shows_a_clear_error_and_keeps_the_question(admin_page, site: Site) -> None:  # noqa: ANN001
    from playwright.sync_api import expect

    page = admin_page
    with site.db() as db:
        before = db.execute("SELECT count(*) FROM messages").fetchone()[0]
    site.engine.stop()
    question = "Who approves remote work requests?"
    page.locator("#question textarea").fill(question)
    page.locator("#send").click()
    expect(page.locator("#chatbot")).to_contain_text("not reachable", timeout=60_000)
    expect(page.locator("#question textarea")).to_have_value(question)
    with site.db() as db:
        assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == before

    # the engine comes back: the kept question is sent again, as is, and answered
    site.start_engine()
    page.locator("#send").click()
    expect(page.locator("#question textarea")).to_have_value("", timeout=TURN_MS)
    expect(page.locator("#chatbot")).to_contain_text(question)
    with site.db() as db:
        assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == before + 2

    # delete that conversation: gone from the list and from the database
    if not page.locator("#delete").is_visible():  # the accordion may be open already
        page.locator("#manage").click()
    page.locator("#delete").click()
    expect(page.locator("#conversations")).not_to_contain_text(question, timeout=30_000)
    with site.db() as db:
        assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == before


def test_the_card_leads_and_an_invented_fact_is_flagged(admin_page, site: Site) -> None:  # noqa: ANN001
    """The default (grounded) answer starts with the documents' own sentences; a card
    sentence's [n] opens its source on that sentence, marked. An invented extension in the
    answer is marked as not found in the sources: the stored answer is given one, and checked
    again by the service's own check, since the small model invents when it likes."""
    from playwright.sync_api import expect

    from appliance.core.services import grounding

    page = admin_page
    # the last test ended by deleting its conversation (its view is cleared): a new chat, with
    # no new-chat click whose reply could clear the box after it is filled
    box = page.locator("#question textarea")
    box.fill("What is the phone extension of the IT helpdesk?")
    expect(box).to_have_value("What is the phone extension of the IT helpdesk?")
    page.locator("#send").click()
    card = page.locator("#chatbot blockquote").last
    expect(card).to_contain_text("From the documents", timeout=TURN_MS)
    expect(card).to_contain_text("4357")
    expect(page.locator("#question textarea")).to_have_value("", timeout=TURN_MS)  # stored
    link = card.locator("a[href^='#evidence-']").first
    target = link.get_attribute("href").lstrip("#")
    link.click()
    mark = page.locator(f"#sources mark.evidence#{target}")
    expect(mark).to_be_visible()
    assert "4357" in mark.inner_text()
    assert urlparse(page.url).path == "/"

    with site.db() as db:
        msg_id, content, citations = db.execute(
            "SELECT id, content, citations FROM messages WHERE role='assistant' "
            "ORDER BY id DESC LIMIT 1"
        ).fetchone()
        sources = {c["number"]: c["text"] for c in json.loads(citations)}
        answer = f"{content}\nThe IT helpdesk extension is 12345."
        checked = grounding.check(
            answer, grounding.TurnGrounding("grounded", (), sources, tuple(sources.values()))
        )
        db.execute(
            "UPDATE messages SET content = ?, verdicts = ?, claims_total = ?, "
            "claims_supported = ? WHERE id = ?",
            (
                answer,
                json.dumps(grounding.stored_verdicts(checked)),
                checked.total,
                checked.supported,
                msg_id,
            ),
        )
    page.reload()
    flag = page.locator("#chatbot .unsupported").last
    expect(flag).to_contain_text("12345", timeout=60_000)
    expect(page.locator("#chatbot .unsupported-mark").last).to_have_attribute(
        "title", "Not found in the sources: 12345"
    )
    expect(page.locator("#panel tr[data-metric='verified']")).to_contain_text("supported:")


def test_no_asset_left_the_box(site: Site) -> None:
    assert site.external == [], f"requests to other hosts: {json.dumps(site.external)[:500]}"
