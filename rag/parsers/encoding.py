"""Bytes to text for plain-text formats: UTF-8 first, then the legacy Korean code page.

CP949 (Windows "ANSI" Korean) is a strict superset of EUC-KR, so one fallback covers both.
"""

from __future__ import annotations

from rag.parsers.errors import ParseError

_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def decode_text(data: bytes) -> str:
    """Decode a text file; raise ``ParseError`` when it is empty, binary or undecodable."""
    if not data.strip():
        raise ParseError("the file is empty")
    if data.startswith(_UTF16_BOMS):  # Windows Notepad's "Unicode"
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise ParseError("the file is not valid UTF-16 text") from exc
    if b"\x00" in data[:4096]:
        raise ParseError("the file looks binary, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    try:  # legacy Korean files: CP949, and EUC-KR which it contains
        return data.decode("cp949")
    except UnicodeDecodeError as exc:
        raise ParseError("the file is not valid UTF-8 or CP949 text") from exc
