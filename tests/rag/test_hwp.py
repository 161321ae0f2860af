"""HWPX (written with python-hwpx) and HWP (real Hancom files, see fixtures/hwp/README.md)
through ``parse_file``: text, headings from outline styles, tables as header-keyed rows with
merged cells, and protected, corrupt, empty and oversized files."""

from __future__ import annotations

import io
import zipfile

import pytest
from support.korean_office import HWP_DIR, hwpx_bytes

from rag.parsers import ParseError, parse_file
from rag.parsers.guard import GuardLimits
from rag.parsers.hwp import read_hwp

POLICY = [
    ("h", "제1장 출장비"),
    "국내 출장 숙박비는 1박에 12만 원까지 지급한다.",
    ("h", "제2장 셔틀버스"),
    [["노선", "출발", "비고"], ["강남 순환", "08:15", "정문"], ["", "09:15", "후문"]],
]


def rewritten(data: bytes, change) -> bytes:  # noqa: ANN001
    """The zip ``data`` with each member's bytes passed through ``change(name, body)``."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info, change(info.filename, src.read(info.filename)))
    return out.getvalue()


def test_hwpx_headings_text_and_keyed_table_rows() -> None:
    doc = parse_file("출장-규정.hwpx", hwpx_bytes(POLICY, merge=(1, 0, 2, 0)))
    assert doc.mime == "application/hwp+zip"
    assert [s.heading for s in doc.sections] == ["제1장 출장비", "제2장 셔틀버스"]
    assert doc.sections[0].text == "국내 출장 숙박비는 1박에 12만 원까지 지급한다."
    assert doc.sections[1].text.splitlines() == [
        "노선 | 출발 | 비고",
        "노선: 강남 순환, 출발: 08:15, 비고: 정문",
        "노선: 강남 순환, 출발: 09:15, 비고: 후문",  # the merged route cell, in both rows
    ]


def test_real_hwpx_from_hancom_office() -> None:
    # the HWPX twin of sample_document.hwp, from the same extract-hwp sdist (written by Hangul)
    data = (HWP_DIR / "sample_document.hwpx").read_bytes()
    doc = parse_file("anthem.hwpx", data)
    assert doc.title == "동해 물과 백두산이 마르고 닳도록"
    assert "하느님이 보우하사 우리나라 만세" in doc.sections[0].text


def test_real_hwp_text_and_table() -> None:
    doc = parse_file("anthem.hwp", (HWP_DIR / "sample_document.hwp").read_bytes())
    assert doc.mime == "application/x-hwp"
    text = doc.sections[0].text
    assert text.startswith("동해 물과 백두산이 마르고 닳도록\n하느님이 보우하사 우리나라 만세")
    assert "무궁화 삼천리 화려 강산 대한 사람 대한으로 길이 보전하세" in text  # the table cell
    assert "|" not in text and "---" not in text  # no markdown left from the library


def test_password_hwp_is_a_protected_document() -> None:
    with pytest.raises(ParseError, match="protected document.*password"):
        parse_file("secret.hwp", (HWP_DIR / "protected_document.hwp").read_bytes())


@pytest.mark.parametrize(
    ("bit", "what"), [(1 << 4, "DRM"), (1 << 2, "distribution"), (1 << 8, "certificate")]
)
def test_drm_and_distribution_flags_are_protected(bit: int, what: str) -> None:
    data = bytearray((HWP_DIR / "sample_document.hwp").read_bytes())
    at = data.find(b"HWP Document File") + 36  # the FileHeader stream's property flags
    data[at] |= bit & 0xFF
    data[at + 1] |= bit >> 8
    with pytest.raises(ParseError, match=f"protected document.*{what}"):
        parse_file("drm.hwp", bytes(data))


def test_encrypted_hwpx_is_a_protected_document() -> None:
    def encrypt(name: str, body: bytes) -> bytes:
        if name != "META-INF/manifest.xml":
            return body
        return body.replace(
            b"/>",
            b'><odf:file-entry odf:full-path="Contents/section0.xml"><odf:encryption-data/>'
            b"</odf:file-entry></odf:manifest>",
            1,
        )

    with pytest.raises(ParseError, match="protected document"):
        parse_file("secret.hwpx", rewritten(hwpx_bytes(["비밀"]), encrypt))


def test_hwp_decompression_bomb_is_refused() -> None:
    with pytest.raises(ParseError, match="decompression bomb"):
        read_hwp((HWP_DIR / "sample_document.hwp").read_bytes(), limit=100)


def test_corrupt_empty_and_oversized_files_are_refused() -> None:
    good = hwpx_bytes(["본문"])
    for name in ("a.hwp", "a.hwpx"):
        with pytest.raises(ParseError, match="empty"):
            parse_file(name, b"")
    with pytest.raises(ParseError, match="damaged|not an HWPX"):
        parse_file("cut.hwpx", good[: len(good) // 2])
    broken = rewritten(good, lambda n, b: b[:-20] if n == "Contents/section0.xml" else b)
    with pytest.raises(ParseError, match="damaged"):
        parse_file("broken.hwpx", broken)
    with pytest.raises(ParseError, match="not a HWP"):
        parse_file("renamed.hwp", good)  # an HWPX named .hwp
    with pytest.raises(ParseError, match="damaged|not an HWP"):
        parse_file("junk.hwp", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600)
    with pytest.raises(ParseError, match="not a HWPX"):
        parse_file("doc.hwpx", (HWP_DIR / "sample_document.hwp").read_bytes())
    with pytest.raises(ParseError, match="zip bomb"):
        parse_file("big.hwpx", good, limits=GuardLimits(max_unpacked_bytes=10_000))
