"""The chat page's pure parts: language choice, the panel, sources and the SVG chart."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime

from appliance.core.services.conversations import ConversationSummary, Turn, TurnStats
from ui.charts import conversation_chart
from ui.chat.view import conversation_choices, conversation_view, error_note
from ui.format import citations_html, link_citations, panel_html
from ui.i18n import STRINGS, from_accept_language, pick, t

STATS = TurnStats(1000, 750, 25, ttft_ms=400.0, e2e_ms=2800.0, retrieval_ms=12.0, ordering="prefix")
CITATION = {
    "number": 1,
    "chunk_id": 7,
    "document_id": 3,
    "title": "VPN <Access>",
    "section": "Reset",
    "page": 4,
    "source": "vpn.pdf",
    "text": "Go to the portal & reset.",
}


def test_language_from_the_browser_and_the_switch() -> None:
    assert from_accept_language("ko-KR,ko;q=0.9,en-US;q=0.8") == "ko"
    assert from_accept_language("fr-FR, en;q=0.5, ko;q=0.7") == "ko"  # by q-value
    assert from_accept_language("de-DE") == "en" and from_accept_language(None) == "en"
    assert pick("en", "ko-KR") == "en" and pick("xx", "ko") == "ko" and pick(None, "") == "en"
    assert set(STRINGS["ko"]) == set(STRINGS["en"])  # every word has both languages
    assert t("ko", "chat.send") == "보내기" and t("xx", "chat.send") == "Send"


def test_panel_shows_every_measure_and_the_derived_rates() -> None:
    html = panel_html(STATS, [1, 2], "en")
    values = dict(re.findall(r"data-metric='(\w+)'><th>[^<]*</th><td[^>]*>([^<]*)<", html))
    assert values["ttft"] == "0.40 s" and values["total"] == "2.80 s"
    assert values["tps"] == "10.0"  # 24 tokens after the first, in 2.4 s
    assert values["itl"] == "100 ms" and values["hit"] == "75%"
    assert values["prompt"] == "1,000" and values["cached"] == "750"
    assert values["chunks"] == "[1] [2]" and values["ordering"] == "prefix"
    assert "width:75.0%" in html  # the cache bar
    assert "첫 토큰까지" in panel_html(STATS, [1], "ko")
    assert "Ask a question" in panel_html(None, [], "en")


def test_sources_are_numbered_escaped_and_open_on_the_chunk() -> None:
    html = citations_html([CITATION], "en")
    assert "id='source-1'" in html and "[1]" in html and "p. 4" in html
    assert "VPN &lt;Access&gt;" in html and "<Access>" not in html
    assert "<mark class='chunk'>Go to the portal &amp; reset.</mark>" in html
    assert "4쪽" in citations_html([CITATION], "ko")
    assert "class='rider'" not in html
    rider = citations_html([CITATION, {**CITATION, "number": 2, "rider": True}], "en")
    assert rider.count("class='rider'") == 1 and "also given (cached)" in rider


def test_chart_and_view_of_a_conversation() -> None:
    svg = conversation_chart([(1.2, 0.0), (0.3, 80.0), (0.25, 90.0)], "en")
    assert svg.count("<rect class='ttft'") == 3 and svg.count("<circle class='hit'") == 3
    assert "http" not in svg.replace("http://www.w3.org", "")  # nothing to fetch
    turns = [Turn("q1", "a1", 11, [CITATION], STATS, 1), Turn("q2", "a2", 12, [], STATS, None)]
    view = conversation_view(turns, "en")
    assert [m["content"] for m in view.history] == ["q1", "a1", "q2", "a2"]
    assert view.message_ids == [None, 11, None, 12] and view.feedback == ["Like", None]
    assert "busy" in error_note("busy", "queue full", "en")
    assert "엔진" in error_note("unavailable", "refused", "ko")


def test_conversation_choices_name_untitled_ones() -> None:
    at = datetime(2025, 1, 2, tzinfo=UTC)
    convs = [ConversationSummary(4, "VPN", at), ConversationSummary(3, "", at)]
    assert conversation_choices(convs, "en") == [("VPN", 4), (t("en", "conv.untitled"), 3)]


def test_answer_citations_link_to_their_sources() -> None:
    text = "Use the portal [1], not [9]. Code `a[1]` stays.\n```\nb[1]\n```\nAgain [1]."
    linked = link_citations(text, [1, 2])
    assert linked.count("[\\[1\\]](#source-1)") == 2
    assert "[9]" in linked and "`a[1]`" in linked and "b[1]" in linked
    assert link_citations(linked, [1]) == linked  # a linked answer stays as it is
    assert link_citations(text, []) == text
    # in a conversation, the last answer links to the sources list (which is the last turn's)
    turns = [
        Turn("q1", "a1 [1]", 11, [CITATION], STATS, 1),
        Turn("q2", "a2 [1]", 12, [CITATION], STATS, None),
    ]
    view = conversation_view(turns, "en")
    assert [m["content"] for m in view.history][1::2] == ["a1 [1]", "a2 [\\[1\\]](#source-1)"]


def test_two_chunks_of_one_section_are_told_apart_by_their_opening_words() -> None:
    """Today's "[1]" and "[4]" both read "VPN Access with HanbitConnect · Resetting your VPN
    password": each now shows how its chunk starts (as few words as tell them apart)."""
    vpn = {**CITATION, "title": "VPN Access with HanbitConnect", "page": None}
    one = {**vpn, "number": 1, "section": "Resetting your VPN password", "source": "vpn.md"}
    first = {**one, "text": "- If you forgot your password, open the portal and press Reset."}
    second = {**one, "number": 4, "text": "If you forgot your password, call the helpdesk."}
    other = {**one, "number": 2, "section": "Installing", "text": "Download the client."}
    html = citations_html([second, other, first], "en")
    summaries = re.findall(r"<summary>(.*?)</summary>", html)
    assert "starts “If you forgot your password, open…”" in summaries[0]  # [1], list marks gone
    assert "starts “If you forgot your password, call…”" in summaries[2]  # [4]
    assert "starts" not in summaries[1]  # a section cited once needs nothing more
    assert "시작: “If you forgot your password, open…”" in citations_html([first, second], "ko")
    # the same section on another page, or another document's, is already a different line
    assert "starts" not in citations_html([first, {**second, "page": 9}], "en")
    # chunks that open alike show more words, up to where they differ
    alike = [
        {**one, "number": n, "text": f"Step one of the reset is the same, then {w} follows."}
        for n, w in ((1, "alpha"), (2, "beta"))
    ]
    assert "same, then alpha…" in citations_html(alike, "en")


def test_an_answer_cut_at_the_length_limit_offers_continue() -> None:
    cut = Turn("q1", "Open the portal and", 11, [CITATION], STATS, None, "length")
    whole = Turn("q1", "Open the portal.", 11, [CITATION], STATS, None, "stop")
    assert conversation_view([whole, cut], "en").cut
    assert not conversation_view([cut, whole], "en").cut  # only the last answer continues
    assert not conversation_view([], "en").cut
    assert conversation_view([cut], "en").outputs()[-2]["visible"] is True
    assert t("en", "chat.cut") == "The answer was cut at the length limit."


def test_an_extractive_answer_offers_write_an_answer() -> None:
    quoted = Turn("q1", "Open the portal. [1]", 11, [CITATION], STATS, None, "stop")
    quoted = replace(quoted, answer_mode="extractive")
    written = replace(quoted, answer_mode="grounded")
    assert conversation_view([written, quoted], "en").write
    assert conversation_view([quoted], "en").outputs()[-1]["visible"] is True
    assert not conversation_view([quoted, written], "en").write  # only for the last answer
    assert not conversation_view([], "en").write
    assert t("ko", "chat.write") == "답변 작성"
    assert t("ko", "chat.continue") == "이어서 생성"


def test_the_panel_shows_the_layout_and_the_shadows_prediction() -> None:
    from dataclasses import replace

    from ui.format import panel_html

    stats = replace(STATS, layout="append", predicted_cached=780)
    html = panel_html(stats, [1, 2])
    assert "data-metric='layout'" in html and ">append<" in html
    assert ">780 (-30)<" in html  # the engine reported 750: 30 fewer than predicted
    assert ">–<" in panel_html(STATS, [1])  # an older turn: nothing recorded
