"""Tests for rag.parsers.parse_file: Markdown and plain text to titled sections.

Office formats, HTML and the content guard: tests/test_office_parsers.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import appliance
from rag.parsers import ParseError, UnsupportedFormat, parse_file
from rag.types import ParsedDocument, Section

SAMPLE_CORPUS = Path(appliance.__file__).parent / "sample_corpus"
SAMPLE_FILES = sorted(
    p for p in SAMPLE_CORPUS.iterdir() if p.suffix in {".md", ".txt"} and p.is_file()
)


# --- Markdown ---------------------------------------------------------------------------


def test_markdown_title_and_sections():
    md = (
        "# VPN Access\n"
        "\n"
        "Intro paragraph about the VPN.\n"
        "\n"
        "## Installing the client\n"
        "\n"
        "Download the client.\n"
        "Run the installer.\n"
        "\n"
        "## Signing in ##\n"
        "Use your company account.\n"
        "\n"
        "### Two-factor\n"
        "Approve the push notification.\n"
    )
    doc = parse_file("it-vpn.md", md.encode())
    assert isinstance(doc, ParsedDocument)
    assert doc.mime == "text/markdown"
    assert doc.title == "VPN Access"
    assert doc.sections == (
        Section(heading="", text="Intro paragraph about the VPN."),
        Section(heading="Installing the client", text="Download the client.\nRun the installer."),
        Section(heading="Signing in", text="Use your company account."),
        Section(heading="Two-factor", text="Approve the push notification."),
    )


def test_markdown_heading_without_body_is_dropped():
    md = "# Title\n\n## Empty\n\n## Full\nSome text.\n"
    doc = parse_file("doc.md", md.encode())
    assert [s.heading for s in doc.sections] == ["Full"]


def test_markdown_without_headings_uses_filename_as_title():
    doc = parse_file("remote_work-policy.md", b"Just a paragraph.\n\nAnd another one.\n")
    assert doc.title == "remote work policy"
    assert doc.sections == (Section(heading="", text="Just a paragraph.\n\nAnd another one."),)


def test_markdown_suffix_is_case_insensitive():
    doc = parse_file("README.MD", b"# Read me\n\n## Usage\nRun it.\n")
    assert doc.mime == "text/markdown"
    assert doc.title == "Read me"
    assert doc.sections[0].heading == "Usage"


def test_markdown_with_only_a_title_has_no_text():
    with pytest.raises(ParseError, match="no text"):
        parse_file("only-title.md", b"# Only a title\n")


def test_markdown_utf8_bom_is_stripped():
    doc = parse_file("bom.md", "\ufeff# 제목\n\n## 섹션\n본문입니다.\n".encode())
    assert doc.title == "제목"
    assert doc.sections == (Section(heading="섹션", text="본문입니다."),)


# --- plain text -------------------------------------------------------------------------


TEXT_DOC = """IT Helpdesk Service Guide

ABOUT THE HELPDESK

The helpdesk is the single point of contact.
It supports all employees.

HOW TO CONTACT US

1. Portal: https://help.example.
2. Phone: extension 4357.

SERVICE HOURS

Monday to Friday, 08:00 to 20:00 KST.
"""


def test_text_title_line_and_caps_headings():
    doc = parse_file("it-helpdesk.txt", TEXT_DOC.encode())
    assert doc.mime == "text/plain"
    assert doc.title == "IT Helpdesk Service Guide"
    assert [s.heading for s in doc.sections] == [
        "About The Helpdesk",
        "How To Contact Us",
        "Service Hours",
    ]
    assert doc.sections[0].text == (
        "The helpdesk is the single point of contact.\nIt supports all employees."
    )
    assert doc.sections[1].text == "1. Portal: https://help.example.\n2. Phone: extension 4357."
    assert doc.sections[2].text == "Monday to Friday, 08:00 to 20:00 KST."


def test_text_without_title_line_uses_filename():
    doc = parse_file("security_badge-rules.txt", b"Badges must be worn.\nAlways.\n")
    assert doc.title == "security badge rules"
    assert doc.sections == (Section(heading="", text="Badges must be worn.\nAlways."),)


def test_text_mixed_case_lines_are_not_headings():
    text = "Guide\n\nThis Is Not A Heading\nbody text\nNO\n"
    doc = parse_file("guide.txt", text.encode())
    # "NO" is too short to be a heading; title-case lines are body text
    assert doc.sections == (Section(heading="", text="This Is Not A Heading\nbody text\nNO"),)


def test_cp949_korean_text_is_decoded():
    text = "온보딩 안내\n\n입사 첫날에는 로비로 와 주세요.\n사원증을 발급받습니다.\n"
    data = text.encode("cp949")
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")  # really a legacy encoding, not UTF-8
    doc = parse_file("onboarding.txt", data)
    assert doc.title == "온보딩 안내"
    assert doc.sections == (
        Section(heading="", text="입사 첫날에는 로비로 와 주세요.\n사원증을 발급받습니다."),
    )


def test_cp949_korean_markdown_is_decoded():
    data = "# 보안 정책\n\n## 비밀번호\n12자 이상이어야 합니다.\n".encode("cp949")
    doc = parse_file("security.md", data)
    assert doc.title == "보안 정책"
    assert doc.sections == (Section(heading="비밀번호", text="12자 이상이어야 합니다."),)


# --- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("data", [b"", b"   ", b"\n\n\t \r\n"])
@pytest.mark.parametrize("name", ["empty.md", "empty.txt"])
def test_empty_or_whitespace_file(name, data):
    with pytest.raises(ParseError) as info:
        parse_file(name, data)
    assert not isinstance(info.value, UnsupportedFormat)
    assert str(info.value) == "the file is empty"


@pytest.mark.parametrize("name", ["blob.txt", "blob.md"])
def test_binary_file_with_nul_bytes(name):
    data = b"PK\x03\x04\x00\x00\x08\x00some zip-like content"
    with pytest.raises(ParseError, match="binary"):
        parse_file(name, data)


def test_undecodable_bytes_are_a_parse_error():
    with pytest.raises(ParseError, match="UTF-8 or CP949"):
        parse_file("bad.txt", b"\xff\xff\xff\xfe text")


@pytest.mark.parametrize(
    "name,shown",
    [
        ("setup.exe", ".exe"),
        ("bundle.zip", ".zip"),
        ("photo.GIF", ".gif"),  # PNG, JPEG and TIFF are read by OCR (tests/rag/test_ocr.py)
        ("Makefile", "(none)"),
        ("notes", "(none)"),
    ],
)
def test_unsupported_suffix(name, shown):
    with pytest.raises(UnsupportedFormat) as info:
        parse_file(name, b"perfectly fine text\n")
    assert isinstance(info.value, ParseError)
    assert str(info.value) == f"unsupported file type {shown}"


# --- the shipped sample corpus ----------------------------------------------------------


def test_sample_corpus_is_present():
    suffixes = {p.suffix for p in SAMPLE_FILES}
    assert suffixes == {".md", ".txt"}
    assert len(SAMPLE_FILES) >= 5


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_corpus_file_parses(path):
    doc = parse_file(path.name, path.read_bytes())
    assert doc.title.strip()
    assert doc.title != path.stem.replace("-", " ")  # a real title, not the fallback
    assert len(doc.sections) >= 3
    assert all(s.text.strip() for s in doc.sections)
    assert sum(1 for s in doc.sections if s.heading) >= 3
    assert "\ufffd" not in "".join(s.text for s in doc.sections)
