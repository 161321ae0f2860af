"""What keeps the chat page honest: the engine going down gives a clear error and keeps the
question; the document card leads the answer and an invented fact is flagged; an extractive
answer (the CPU profile's default) offers "Write an answer"; no page asked another host for
anything. The last file of the package (see __init__.py)."""

from __future__ import annotations

import json
import time
from urllib.parse import urlparse

import pytest

from .chat_site import TURN_MS, Site, admin_settings

pytestmark = pytest.mark.browser


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


def test_an_extractive_answer_offers_write_an_answer(admin_page, site: Site) -> None:  # noqa: ANN001
    """In extractive mode the answer is the card alone, at once, and "Write an answer" below it
    asks the model, grounded: the written answer replaces the extractive one and the button
    goes away."""
    from playwright.sync_api import expect

    page = admin_page
    question = "How do I reset my VPN password?"
    last = "SELECT count(*), (SELECT answer_mode FROM messages ORDER BY id DESC LIMIT 1), "
    last += "(SELECT completion_tokens FROM messages ORDER BY id DESC LIMIT 1) FROM messages"
    with admin_settings(site, {"answer_mode": "extractive"}):
        page.locator("#question textarea").fill(question)
        page.locator("#send").click()
        expect(page.locator("#write")).to_be_visible(timeout=TURN_MS)
        expect(page.locator("#write")).to_have_text("Write an answer")
        expect(page.locator("#chatbot blockquote").last).to_contain_text("From the documents")
        with site.db() as db:
            count, mode, tokens = db.execute(last).fetchone()
        assert (mode, tokens) == ("extractive", 0)  # no generation
        page.locator("#write").click()
        # the written answer is stored once the model has finished: wait for it there
        deadline, written = time.monotonic() + TURN_MS / 1000, (count, mode, tokens)
        while written[1] != "grounded" and time.monotonic() < deadline:
            time.sleep(0.5)
            with site.db() as db:
                written = db.execute(last).fetchone()
    assert written[0] == count and written[1] == "grounded" and written[2] > 0  # replaced
    expect(page.locator("#write-box")).to_be_hidden(timeout=TURN_MS)
    expect(page.locator("#panel tr[data-metric='ttft']")).to_be_visible()


def test_no_asset_left_the_box(site: Site) -> None:
    assert site.external == [], f"requests to other hosts: {json.dumps(site.external)[:500]}"
