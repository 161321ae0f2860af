"""A grounded answer as the chat shows it: the card, unsupported sentences marked with their
reason, citations that point nowhere flagged, card sentences highlighted in their sources, and
the panel's "verified" line."""

from __future__ import annotations

import re

from ui.format import citations_html, panel_html
from ui.grounded import answer_bubble, flagged_answer, verified_line

CHUNK = (
    "The Travel Desk books trips. Call the Travel Desk on extension 3350. Bookings need approval."
)
START = CHUNK.index("Call")
END = CHUNK.index("3350.") + 5
CARD = [{"number": 2, "chunk_id": 9, "start": START, "end": END, "text": CHUNK[START:END]}]
CITATIONS = [
    {
        "number": 2,
        "title": "Business travel",
        "section": "The Travel Desk",
        "page": None,
        "source": "travel.md",
        "text": CHUNK,
    }
]
ANSWER = "The extension is 12345 [2]. Bookings need approval [2]. See also [7]."
VERIFICATION = {
    "supported": 1,
    "total": 2,
    "sentences": [
        {
            "start": 0,
            "end": 27,
            "supported": False,
            "cites": [2],
            "unsupported_facts": ["12345"],
            "reason": "fact not in sources: 12345",
            "claim": True,
        },
        {"start": 28, "end": 55, "supported": True, "cites": [2], "reason": "ok", "claim": True},
    ],
    "bad_markers": [7],
}


def test_the_card_comes_first_and_links_to_the_sentence_in_its_source() -> None:
    bubble = answer_bubble(ANSWER, [2], "en", CARD, VERIFICATION, "grounded")
    card, _, answer = bubble.partition("\n\n")
    assert card.startswith("> **From the documents**")
    assert "“Call the Travel Desk on extension 3350.”" in card
    assert "(#evidence-2-0)" in card
    assert "[\\[2\\]](#source-2)" in answer  # the answer's own citations still link
    html = citations_html(CITATIONS, "en", CARD)
    assert (
        "<mark class='evidence' id='evidence-2-0'>Call the Travel Desk on extension 3350.</mark>"
        in html
    )


def test_unsupported_sentences_and_dangling_citations_are_flagged() -> None:
    text = flagged_answer(ANSWER, VERIFICATION, "en")
    assert "<span class='unsupported' title='Not found in the sources: 12345'>" in text
    assert text.count("class='unsupported'") == 1  # the supported sentence is not marked
    assert "class='bad-cite'" in text and "There is no source [7]" in text
    ko = flagged_answer(ANSWER, VERIFICATION, "ko")
    assert "출처에서 찾을 수 없음: 12345" in ko


def test_extractive_shows_the_card_once_and_unchecked_answers_as_they_are() -> None:
    extractive = answer_bubble(CARD[0]["text"] + " [2]", [2], "en", CARD, None, "extractive")
    assert extractive.count("Call the Travel Desk") == 1
    assert answer_bubble("Plain answer.", [], "en") == "Plain answer."


def test_the_panel_says_how_many_claims_the_sources_support() -> None:
    from appliance.core.services.conversations import TurnStats

    line = verified_line(VERIFICATION, "en")
    assert line == "supported: 1 of 2 claims"
    stats = TurnStats(100, 50, 10, 200.0, 900.0, 12.0, "prefix")
    assert "supported: 1 of 2 claims" in panel_html(stats, [2], "en", line)
    assert verified_line({"supported": 0, "total": 0}, "en") is None
    assert "주장 2개 중 1개" in verified_line(VERIFICATION, "ko")


PLANTED = (
    "See [click](http://evil.example) and ![x](http://evil/x.png) "
    "<img src=x onerror=alert(1)> **bold** <https://evil.example> https://evil.example "
    "www.evil.example mail@evil.example [ref][1] &amp; `code` ~~gone~~ # head $$x^2$$ \\*"
)


def test_a_documents_markup_in_the_card_is_shown_as_text() -> None:
    """A planted link, image, tag, emphasis or autolink in a document's sentence is text in the
    card (issue: the card rendered the document's Markdown); the card's own [n] still links."""
    from html.parser import HTMLParser

    import markdown_it

    card = [{"number": 3, "chunk_id": 1, "start": 0, "end": len(PLANTED), "text": PLANTED}]
    source = answer_bubble("", [3], "en", card, None, "extractive")
    # GitHub's autolinks (marked's GFM) need an unescaped scheme, ``www.`` or ``@``; Gradio's
    # LaTeX an unescaped ``$$``
    assert not re.search(r"(?<!\\)(:|www\.|@|\$)", source.partition("\n>\n")[2])
    rendered = markdown_it.MarkdownIt("commonmark").render(source + "\n\n[1]: http://evil.example")

    class Tags(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[tuple[str, dict]] = []
            self.text = ""

        def handle_starttag(self, tag: str, attrs: list) -> None:
            self.tags.append((tag, dict(attrs)))

        def handle_data(self, data: str) -> None:
            self.text += data

    page = Tags()
    page.feed(rendered)
    assert [t for t, _a in page.tags] == ["blockquote", "p", "strong", "p", "a"]
    assert page.tags[-1][1] == {"href": "#evidence-3-0"}
    assert f"“{PLANTED}” [3]" in page.text  # the text, every character of it
