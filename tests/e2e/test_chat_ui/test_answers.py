"""The chat page answers: the answer streams in, cites its sources and fills the panel (timings,
cache hits, the chart); feedback is stored; an answer's [n] opens its source. The first tests of
the package (see __init__.py): the later files build on the conversation these leave."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlparse

import pytest

from .chat_site import SCREENSHOTS, TURN_MS, VPN_Q, Site, metric

pytestmark = pytest.mark.browser


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
