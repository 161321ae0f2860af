"""Tests for the checks before parsing: real type by content, zip bombs, empty files, text
encodings."""

from __future__ import annotations

import io
import zipfile

import pytest
from support.office_files import docx_bytes, pdf_bytes, pptx_bytes, zip_bomb_docx

from rag.parsers import GuardLimits, ParseError, UnsupportedFormat, parse_file

PDF = pdf_bytes([("Title", "Some body text.")])

# --- content does not match the suffix --------------------------------------------------


@pytest.mark.parametrize(
    "name,data,message",
    [
        ("report.docx", PDF, "the file's content is not a DOCX (looks like PDF)"),
        ("deck.pptx", PDF, "the file's content is not a PPTX (looks like PDF)"),
        ("deck.pptx", docx_bytes(), "the file's content is not a PPTX (looks like DOCX)"),
        ("memo.docx", pptx_bytes(), "the file's content is not a DOCX (looks like PPTX)"),
        ("setup.pdf", b"MZ\x90\x00\x03" + b"\x00" * 64, "not a PDF (looks like a Windows program)"),
        ("notes.pdf", b"just some text\n", "the file's content is not a PDF (looks like text)"),
        ("page.html", PDF, "the file looks binary, not HTML (looks like PDF)"),
        ("notes.txt", PDF, "the file looks binary, not text (looks like PDF)"),
    ],
)
def test_content_must_match_suffix(name, data, message):
    with pytest.raises(ParseError) as info:
        parse_file(name, data)
    assert not isinstance(info.value, UnsupportedFormat)
    assert message in str(info.value)


def test_plain_zip_named_docx():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("readme.txt", "hello")
    with pytest.raises(ParseError, match=r"not a DOCX \(looks like a ZIP archive\)"):
        parse_file("x.docx", buf.getvalue())


def test_broken_zip_named_docx_is_damaged():
    with pytest.raises(ParseError, match="DOCX is damaged"):
        parse_file("x.docx", b"PK\x03\x04" + b"garbage" * 20)


def test_truncated_docx_is_damaged():
    data = docx_bytes()
    with pytest.raises(ParseError, match="damaged"):
        parse_file("cut.docx", data[: len(data) // 2])


def test_exe_is_unsupported():
    with pytest.raises(UnsupportedFormat, match=r"unsupported file type \.exe"):
        parse_file("setup.exe", b"MZ\x90\x00" + b"\x00" * 64)


# --- zip bombs --------------------------------------------------------------------------


def test_highly_compressed_docx_is_refused_as_zip_bomb(tmp_path):
    data = zip_bomb_docx(tmp_path / "bomb.docx", unpacked_mb=24)
    assert len(data) < 200_000  # it really is tiny on disk
    with pytest.raises(ParseError, match=r"expands to 24 MB .*zip bomb"):
        parse_file("bomb.docx", data)


def test_docx_over_the_default_200_mb_limit_is_refused(tmp_path):
    data = zip_bomb_docx(tmp_path / "bomb.docx", unpacked_mb=210)  # about 0.5 s to build
    with pytest.raises(ParseError) as info:
        parse_file("bomb.docx", data)
    assert str(info.value) == (
        "the document expands to 210 MB when unpacked (limit 200 MB); refusing (zip bomb?)"
    )


def test_docx_over_a_configured_unpacked_limit_is_refused():
    limits = GuardLimits(max_unpacked_bytes=10_000)
    with pytest.raises(ParseError, match=r"limit 0\.0 MB\); refusing \(zip bomb\?\)"):
        parse_file("big.docx", docx_bytes(), limits=limits)


def test_too_many_members_is_refused():
    with pytest.raises(ParseError, match="zip bomb"):
        parse_file("many.pptx", pptx_bytes(), limits=GuardLimits(max_members=5))


# --- empty files ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["e.pdf", "e.docx", "e.pptx", "e.html", "e.htm", "e.md"])
@pytest.mark.parametrize("data", [b"", b" \n"])
def test_empty_file(name, data):
    with pytest.raises(ParseError) as info:
        parse_file(name, data)
    assert str(info.value) == "the file is empty"


def test_html_with_no_text():
    with pytest.raises(ParseError, match="no text found"):
        parse_file("blank.html", b"<html><body><script>x()</script></body></html>")


# --- text encodings ---------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["cp949", "euc-kr"])
def test_legacy_korean_text(encoding):
    text = "보안 정책\n\n비밀번호는 12자 이상이어야 합니다.\n"
    doc = parse_file("policy.txt", text.encode(encoding))
    assert doc.title == "보안 정책"
    assert doc.sections[0].text == "비밀번호는 12자 이상이어야 합니다."


def test_cp949_only_hangul_is_decoded():
    data = "똠방각하 읽기\n".encode("cp949")  # 똠 is in CP949 but not in EUC-KR
    with pytest.raises(UnicodeDecodeError):
        data.decode("euc-kr")
    assert parse_file("x.txt", data).sections[0].text == "똠방각하 읽기"


def test_utf16_with_bom_is_decoded():
    doc = parse_file("notepad.txt", "메모\n\n내용입니다.\n".encode("utf-16"))
    assert doc.title == "메모"
    assert doc.sections[0].text == "내용입니다."
