"""``parse_file``: pick a parser by suffix, check the content first, then parse."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rag.parsers.docx import parse_docx
from rag.parsers.encoding import decode_text
from rag.parsers.errors import ParseError, UnsupportedFormat
from rag.parsers.guard import DEFAULT_LIMITS, GuardLimits, check_content
from rag.parsers.html import parse_html
from rag.parsers.markdown import parse_markdown
from rag.parsers.pdf import parse_pdf
from rag.parsers.plaintext import parse_text
from rag.parsers.pptx import parse_pptx
from rag.types import ParsedDocument

Parser = Callable[[bytes, str], ParsedDocument]


def _markdown(data: bytes, fallback_title: str) -> ParsedDocument:
    return parse_markdown(decode_text(data), fallback_title)


def _text(data: bytes, fallback_title: str) -> ParsedDocument:
    return parse_text(decode_text(data), fallback_title)


# suffix -> (what the guard expects the content to be, parser)
_PARSERS: dict[str, tuple[str, Parser]] = {
    ".md": ("text", _markdown),
    ".markdown": ("text", _markdown),
    ".txt": ("text", _text),
    ".text": ("text", _text),
    ".html": ("HTML", parse_html),
    ".htm": ("HTML", parse_html),
    ".pdf": ("PDF", parse_pdf),
    ".docx": ("DOCX", parse_docx),
    ".pptx": ("PPTX", parse_pptx),
}

SUPPORTED_SUFFIXES: frozenset[str] = frozenset(_PARSERS)


def parse_file(name: str, data: bytes, *, limits: GuardLimits = DEFAULT_LIMITS) -> ParsedDocument:
    """Parse by file suffix; raise ``ParseError`` with a user-facing reason.

    ``UnsupportedFormat`` (a ``ParseError``) names a suffix the appliance cannot read.
    """
    suffix = Path(name).suffix.lower()
    fallback = Path(name).stem.replace("-", " ").replace("_", " ").strip() or name
    if suffix not in _PARSERS:
        raise UnsupportedFormat(f"unsupported file type {suffix or '(none)'}")
    expected, parser = _PARSERS[suffix]
    check_content(expected, data, limits)
    doc = parser(data, fallback)
    if not doc.sections:
        raise ParseError("no text found in the file")
    return doc
