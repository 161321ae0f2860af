"""Parsers: file bytes to a ``ParsedDocument`` with titled sections.

This slice handles Markdown and plain text; other formats raise ``UnsupportedFormat``.
"""

from __future__ import annotations

import re
from pathlib import Path

from rag.types import ParsedDocument, Section

MARKDOWN_SUFFIXES = {".md", ".markdown"}
TEXT_SUFFIXES = {".txt", ".text"}
SUPPORTED_SUFFIXES = MARKDOWN_SUFFIXES | TEXT_SUFFIXES

_MD_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


class ParseError(ValueError):
    """A file could not be turned into text; the message says why, for the user."""


class UnsupportedFormat(ParseError):
    pass


def decode_text(data: bytes) -> str:
    if not data.strip():
        raise ParseError("the file is empty")
    if b"\x00" in data[:4096]:
        raise ParseError("the file looks binary, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    try:  # legacy Korean files
        return data.decode("cp949")
    except UnicodeDecodeError as exc:
        raise ParseError("the file is not valid UTF-8 or CP949 text") from exc


def parse_markdown(text: str, fallback_title: str) -> ParsedDocument:
    title = ""
    sections: list[Section] = []
    heading, buf = "", []

    def close() -> None:
        body = "\n".join(buf).strip()
        if body:
            sections.append(Section(heading=heading, text=body))

    for line in text.splitlines():
        m = _MD_HEADING.match(line)
        if m:
            level, name = len(m.group(1)), m.group(2).strip()
            if level == 1 and not title:
                close()
                title, heading, buf = name, "", []
                continue
            close()
            heading, buf = name, []
        else:
            buf.append(line)
    close()
    return ParsedDocument(
        title=title or fallback_title, sections=tuple(sections), mime="text/markdown"
    )


def _is_caps_heading(line: str) -> bool:
    s = line.strip()
    letters = [c for c in s if c.isalpha()]
    return (
        3 <= len(s) <= 80
        and len(letters) >= 3
        and s.upper() == s
        and any(c.isupper() for c in letters)
    )


def parse_text(text: str, fallback_title: str) -> ParsedDocument:
    lines = text.splitlines()
    title = fallback_title
    if len(lines) > 1 and lines[0].strip() and not lines[1].strip():
        title, lines = lines[0].strip(), lines[2:]
    sections: list[Section] = []
    heading, buf = "", []
    for line in lines:
        if _is_caps_heading(line):
            if "\n".join(buf).strip():
                sections.append(Section(heading=heading, text="\n".join(buf).strip()))
            heading, buf = line.strip().title(), []
        else:
            buf.append(line)
    if "\n".join(buf).strip():
        sections.append(Section(heading=heading, text="\n".join(buf).strip()))
    return ParsedDocument(title=title, sections=tuple(sections), mime="text/plain")


def parse_file(name: str, data: bytes) -> ParsedDocument:
    """Parse by file suffix; raise ``ParseError`` with a user-facing reason."""
    suffix = Path(name).suffix.lower()
    fallback = Path(name).stem.replace("-", " ").replace("_", " ").strip() or name
    if suffix not in SUPPORTED_SUFFIXES:
        raise UnsupportedFormat(f"unsupported file type {suffix or '(none)'}")
    text = decode_text(data)
    doc = (
        parse_markdown(text, fallback)
        if suffix in MARKDOWN_SUFFIXES
        else parse_text(text, fallback)
    )
    if not doc.sections:
        raise ParseError("no text found in the file")
    return doc
