"""A document's markup is text in the "From the documents" card (finding: the card rendered a
document's Markdown, so a link planted in a document became a clickable link in the card).

A document whose sentence holds a Markdown link, an image, an HTML image with a handler, bold
and autolinks is ingested; a staff user asks the question that sentence answers, in Chromium.
The card in the page quotes the sentence as it is written, and holds no link but its own [n]
(which still opens the source on the sentence), no image, no emphasis; nothing was requested
from the planted addresses."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

from appliance.bench.load_browser import open_chat

pytestmark = pytest.mark.browser

PASSWORD = "password-789"
TURN_MS = 300_000  # one answer on a busy 2-core machine, at most
PLANTED = (
    "Replacement toner cartridges are ordered through the [supplies portal]"
    "(http://evil.example/toner) ![beacon](http://evil.example/b.png) "
    "<img src=x onerror=alert(1)> **only** on Fridays <https://evil.example/a> "
    "https://evil.example/b"
)
TONER = f"# Printer toner\n\n## Ordering toner\n\n{PLANTED}.\n"
QUESTION = "How are replacement toner cartridges ordered?"


def test_a_link_planted_in_a_document_is_text_in_the_card(own_site, tmp_path, browser) -> None:  # noqa: ANN001
    from playwright.sync_api import expect

    with own_site() as site:
        (tmp_path / "toner.md").write_text(TONER, encoding="utf-8")
        site.appliance.ingest.ingest_folder(tmp_path)
        page = open_chat(browser, site.base, "alice", PASSWORD)
        asked: list[str] = []
        page.on("request", lambda request: asked.append(request.url))
        try:
            page.locator("#question textarea").fill(QUESTION)
            page.locator("#send").click()
            card = page.locator("#chatbot blockquote").first
            expect(card).to_contain_text("From the documents", timeout=TURN_MS)
            expect(card).to_contain_text("supplies portal", timeout=TURN_MS)
            expect(page.locator("#question textarea")).to_have_value("", timeout=TURN_MS)
            # no link but the card's own, no image, no markup of the document's
            hrefs = [a.get_attribute("href") for a in card.locator("a").all()]
            assert hrefs and all(h.startswith("#evidence-") for h in hrefs), hrefs
            assert card.locator("img, em, code, del, h1, h2").count() == 0
            assert card.locator("strong").all_inner_texts() == ["From the documents"]
            # the sentence as it is written, markup and all, as text
            expect(card).to_contain_text("[supplies portal](http://evil.example/toner)")
            expect(card).to_contain_text("<img src=x onerror=alert(1)> **only** on Fridays")
            expect(card).to_contain_text("<https://evil.example/a> https://evil.example/b")
            # the card's own [n] still opens its source on the sentence
            card.locator("a").first.click()
            target = hrefs[0].lstrip("#")
            expect(page.locator(f"#sources mark.evidence#{target}")).to_be_visible()
            assert urlparse(page.url).path == "/"
        finally:
            page.context.close()
    planted = [u for u in asked if "evil.example" in u or urlparse(u).path.endswith("/x")]
    assert planted == [], planted
