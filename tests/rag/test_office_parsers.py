"""Tests for PDF, DOCX, PPTX and HTML parsing on real files built with the real libraries."""

from __future__ import annotations

import pytest
from support.office_files import (
    blank_pdf_bytes,
    docx_bytes,
    encrypted_pdf_bytes,
    korean_font,
    pdf_bytes,
    pptx_bytes,
)

from rag.parsers import ParseError, parse_file
from rag.types import Section

PAGES = [
    ("Getting Started", "Install the client and sign in with your account."),
    ("Daily Use", "Connect before opening internal sites. Disconnect at night."),
    ("Troubleshooting", "Restart the client. Then call the helpdesk on extension 4357."),
]

# --- PDF --------------------------------------------------------------------------------


def test_pdf_one_section_per_page_with_page_numbers():
    doc = parse_file("vpn-guide.pdf", pdf_bytes(PAGES, title="VPN Guide"))
    assert doc.mime == "application/pdf"
    assert doc.title == "VPN Guide"
    assert [s.page for s in doc.sections] == [1, 2, 3]
    assert [s.heading for s in doc.sections] == [h for h, _ in PAGES]
    for section, (_, body) in zip(doc.sections, PAGES, strict=True):
        assert " ".join(section.text.split()) == body


def test_pdf_without_metadata_title_uses_filename():
    doc = parse_file("remote_access.pdf", pdf_bytes(PAGES[:1]))
    assert doc.title == "remote access"


def test_pdf_sentence_first_line_is_not_a_heading():
    doc = parse_file("memo.pdf", pdf_bytes([("This is a sentence.", "And more text here.")]))
    assert doc.sections[0].heading == ""
    assert doc.sections[0].text.startswith("This is a sentence.")


def test_pdf_korean_text_with_a_ttf_font():
    font = korean_font()
    if font is None:
        pytest.skip("no Korean TTF font on this machine")
    page = ("보안 정책", "비밀번호는 12자 이상이어야 합니다.")
    doc = parse_file("ko.pdf", pdf_bytes([page], font=font))
    assert "비밀번호" in doc.sections[0].text


def test_pdf_with_user_password_is_refused_as_encrypted():
    data = encrypted_pdf_bytes(pdf_bytes(PAGES), user_password="s3cret")
    with pytest.raises(ParseError, match="encrypted"):
        parse_file("secret.pdf", data)


def test_pdf_with_only_an_owner_password_opens():
    data = encrypted_pdf_bytes(pdf_bytes(PAGES), user_password="")
    doc = parse_file("restricted.pdf", data)
    assert [s.page for s in doc.sections] == [1, 2, 3]


def test_truncated_pdf_is_damaged():
    data = pdf_bytes(PAGES)
    with pytest.raises(ParseError, match="damaged or not a PDF"):
        parse_file("cut.pdf", data[: len(data) // 2])


def test_pdf_without_text_layer_says_scanned():
    with pytest.raises(ParseError, match="no text layer"):
        parse_file("scan.pdf", blank_pdf_bytes())


# --- DOCX -------------------------------------------------------------------------------


def test_docx_headings_start_sections_and_tables_are_text():
    doc = parse_file("travel.docx", docx_bytes())
    assert doc.mime == ("application/vnd.openxmlformats-officedocument.wordprocessingml.document")
    assert doc.title == "Travel Policy"
    assert doc.sections == (
        Section(heading="", text="This policy covers business travel."),
        Section(heading="Booking", text="Book flights through the portal."),
        Section(
            heading="Hotels",
            text="Stay at approved hotels.\nCity | Nightly limit\nSeoul | 200,000 KRW",
        ),
        Section(heading="Expenses", text="Submit receipts within 30 days."),
    )


def test_docx_core_title_wins():
    assert parse_file("t.docx", docx_bytes(core_title="Official Title")).title == "Official Title"


# --- PPTX -------------------------------------------------------------------------------


def test_pptx_one_section_per_slide_with_notes_and_table():
    doc = parse_file("review.pptx", pptx_bytes())
    assert doc.mime == ("application/vnd.openxmlformats-officedocument.presentationml.presentation")
    assert doc.title == "Quarterly Review"
    assert [(s.heading, s.page) for s in doc.sections] == [
        ("Quarterly Review", 1),
        ("Next Steps", 2),
    ]
    assert doc.sections[0].text == "Revenue grew 12%\nNotes: Mention the new region."
    assert doc.sections[1].text == (
        "Hire two engineers\nRole | Count\nEngineer | 2\nNotes: Ask for budget approval."
    )


# --- HTML -------------------------------------------------------------------------------

HTML = """<!DOCTYPE html>
<html><head><title>Leave Policy</title><style>p { color: red }</style>
<script>var secret = "do not index";</script></head>
<body>
<nav><a href="/">Home</a> | <a href="/hr">HR</a></nav>
<!-- a comment -->
<p>Everyone gets   <b>15 days</b>
of annual leave.</p>
<h2>Sick leave</h2>
<p>Tell your manager.</p><ul><li>Day one</li><li>Day two</li></ul>
<h3>Long illness</h3>
<table><tr><th>Days</th><th>Paper</th></tr><tr><td>3+</td><td>Doctor's note</td></tr></table>
<footer>Copyright HR</footer>
</body></html>
"""


def test_html_sections_without_scripts_styles_nav_footer():
    doc = parse_file("leave.html", HTML.encode())
    assert doc.mime == "text/html"
    assert doc.title == "Leave Policy"
    assert doc.sections == (
        Section(heading="", text="Everyone gets 15 days of annual leave."),
        Section(heading="Sick leave", text="Tell your manager.\nDay one\nDay two"),
        Section(heading="Long illness", text="Days | Paper\n3+ | Doctor's note"),
    )
    everything = " ".join(s.text for s in doc.sections)
    for dropped in ("secret", "color", "Home", "Copyright", "comment"):
        assert dropped not in everything


def test_htm_title_from_h1_and_declared_euc_kr():
    page = '<meta charset="euc-kr"><h1>휴가 안내</h1><p>연차는 15일입니다.</p>'
    doc = parse_file("leave.HTM", page.encode("euc-kr"))
    assert doc.title == "휴가 안내"
    assert doc.sections == (Section(heading="휴가 안내", text="연차는 15일입니다."),)


def test_html_without_charset_falls_back_to_cp949():
    doc = parse_file("ko.html", "<p>사원증을 발급받습니다.</p>".encode("cp949"))
    assert doc.sections[0].text == "사원증을 발급받습니다."
