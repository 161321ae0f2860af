"""``parse_file``: pick a parser by suffix, check the content first, then parse."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rag.ocr import OcrSettings, Progress
from rag.parsers.csvfile import parse_csv
from rag.parsers.docx import parse_docx
from rag.parsers.encoding import decode_text
from rag.parsers.errors import ParseError, UnsupportedFormat
from rag.parsers.guard import DEFAULT_LIMITS, IMAGE, GuardLimits, check_content
from rag.parsers.html import parse_html
from rag.parsers.hwp import parse_hwp
from rag.parsers.hwpx import parse_hwpx
from rag.parsers.image import parse_image
from rag.parsers.markdown import parse_markdown
from rag.parsers.pdf import parse_pdf
from rag.parsers.plaintext import parse_text
from rag.parsers.pptx import parse_pptx
from rag.parsers.xls import parse_xls
from rag.parsers.xlsx import parse_xlsx
from rag.types import ParsedDocument

Parser = Callable[[bytes, str], ParsedDocument]
# a parser that reads pages without text by OCR (given settings; None: OCR is off)
OcrParser = Callable[[bytes, str, OcrSettings | None, Progress | None], ParsedDocument]


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
    # Hancom Office (한글) documents and spreadsheets: rows and table rows keyed by their headers
    ".hwpx": ("HWPX", parse_hwpx),
    ".hwp": ("HWP", parse_hwp),
    ".xlsx": ("XLSX", parse_xlsx),
    ".xls": ("XLS", parse_xls),
    ".csv": ("text", parse_csv),
}

# suffix -> (what the guard expects, parser), for the formats OCR reads; looked up first
_OCR_PARSERS: dict[str, tuple[str, OcrParser]] = {
    ".pdf": ("PDF", parse_pdf),
    ".png": (IMAGE, parse_image),
    ".jpg": (IMAGE, parse_image),
    ".jpeg": (IMAGE, parse_image),
    ".tif": (IMAGE, parse_image),
    ".tiff": (IMAGE, parse_image),
}

SUPPORTED_SUFFIXES: frozenset[str] = frozenset(_PARSERS) | frozenset(_OCR_PARSERS)


def parse_file(
    name: str,
    data: bytes,
    *,
    limits: GuardLimits = DEFAULT_LIMITS,
    ocr: OcrSettings | None = None,
    progress: Progress | None = None,
) -> ParsedDocument:
    """Parse by file suffix; raise ``ParseError`` with a user-facing reason.

    ``UnsupportedFormat`` (a ``ParseError``) names a suffix the appliance cannot read. Image
    files and PDF pages without a text layer are read with ``ocr`` (None: OCR is off), one
    ``progress`` line per page.
    """
    suffix = Path(name).suffix.lower()
    fallback = Path(name).stem.replace("-", " ").replace("_", " ").strip() or name
    if suffix in _OCR_PARSERS:
        expected, reader = _OCR_PARSERS[suffix]
        check_content(expected, data, limits)
        return _some_text(reader(data, fallback, ocr, progress))
    if suffix not in _PARSERS:
        raise UnsupportedFormat(f"unsupported file type {suffix or '(none)'}")
    expected, parser = _PARSERS[suffix]
    check_content(expected, data, limits)
    return _some_text(parser(data, fallback))


def _some_text(doc: ParsedDocument) -> ParsedDocument:
    if not doc.sections:
        raise ParseError("no text found in the file")
    return doc
