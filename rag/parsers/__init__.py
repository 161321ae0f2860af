"""Parsers: file bytes to a ``ParsedDocument`` with titled sections.

Markdown, plain text, HTML, PDF, DOCX and PPTX; every file passes :mod:`rag.parsers.guard`
(real type by content, zip-bomb limits) before its parser sees it. Any other suffix raises
``UnsupportedFormat``; every failure is a ``ParseError`` whose message is for the user.
"""

from rag.parsers.dispatch import SUPPORTED_SUFFIXES, parse_file
from rag.parsers.encoding import decode_text
from rag.parsers.errors import ParseError, UnsupportedFormat
from rag.parsers.guard import DEFAULT_LIMITS, GuardLimits
from rag.parsers.markdown import parse_markdown
from rag.parsers.plaintext import parse_text

__all__ = [
    "DEFAULT_LIMITS",
    "SUPPORTED_SUFFIXES",
    "GuardLimits",
    "ParseError",
    "UnsupportedFormat",
    "decode_text",
    "parse_file",
    "parse_markdown",
    "parse_text",
]
