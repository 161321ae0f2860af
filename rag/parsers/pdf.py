"""PDF to sections with pypdf: the text layer of each page is one section, page kept.

A page without a text layer (a scan) is rendered and read by OCR when OCR settings are given
(``rag.parsers.ocr_pages``); a mixed PDF has only its image pages OCR'd.
"""

from __future__ import annotations

import io

from pypdf import PdfReader
from pypdf.errors import DependencyError, FileNotDecryptedError

from rag.ocr import OcrSettings, Progress
from rag.parsers.errors import ParseError
from rag.parsers.ocr_pages import OCR_OFF, ocr_page
from rag.parsers.page_text import looks_like_heading, page_section
from rag.parsers.pdf_render import render_pages
from rag.types import ParsedDocument, Section

__all__ = ["MIME", "looks_like_heading", "page_section", "parse_pdf"]

MIME = "application/pdf"

_ENCRYPTED = "the PDF is encrypted with a password; remove the password and upload it again"


def _open(data: bytes) -> PdfReader:
    try:
        reader = PdfReader(io.BytesIO(data))
    except Exception as exc:  # pypdf raises many kinds on malformed input
        raise ParseError(f"the PDF is damaged or not a PDF: {exc}") from exc
    if reader.is_encrypted:
        try:
            opened = reader.decrypt("")  # many "protected" PDFs only restrict printing
        except DependencyError as exc:
            raise ParseError(f"the PDF is encrypted and cannot be opened here: {exc}") from exc
        except Exception as exc:
            raise ParseError(f"{_ENCRYPTED} ({exc})") from exc
        if not opened:
            raise ParseError(_ENCRYPTED)
    return reader


def _title(reader: PdfReader) -> str:
    try:
        meta = reader.metadata
        title = meta.title if meta is not None else None
    except Exception:  # a broken info dictionary only costs us the title
        return ""
    return title.strip() if isinstance(title, str) else ""


def parse_pdf(
    data: bytes,
    fallback_title: str,
    ocr: OcrSettings | None = None,
    progress: Progress | None = None,
) -> ParsedDocument:
    """Extract each page's text layer, OCR (with ``ocr``) the pages that have none; raise
    ``ParseError`` when no text can be had."""
    reader = _open(data)
    found: dict[int, Section] = {}
    blank: list[int] = []
    try:
        pages = list(reader.pages)
        for number, page in enumerate(pages, start=1):
            section = page_section(page.extract_text() or "", number)
            if section is not None:
                found[number] = section
            else:
                blank.append(number)
    except FileNotDecryptedError as exc:
        raise ParseError(_ENCRYPTED) from exc
    except Exception as exc:
        raise ParseError(f"the PDF is damaged or not a PDF: {exc}") from exc
    if not pages:
        raise ParseError("the PDF has no pages")
    notes: list[str] = []
    if blank and ocr is not None:
        found.update(_ocr_pages(data, blank, ocr, progress, notes))
    if not found:
        why = "; ".join(notes) or OCR_OFF
        raise ParseError(f"the PDF has no text layer (a scanned image?) and OCR read none: {why}")
    return ParsedDocument(
        title=_title(reader) or fallback_title,
        sections=tuple(found[n] for n in sorted(found)),
        mime=MIME,
        notes=tuple(notes),
    )


def _ocr_pages(
    data: bytes, blank: list[int], ocr: OcrSettings, progress: Progress | None, notes: list[str]
) -> dict[int, Section]:
    """OCR the pages in ``blank``; a skipped page adds a note to ``notes``."""
    out: dict[int, Section] = {}
    try:
        rendered = list(render_pages(data, blank, ocr.dpi, ocr.max_pixels))
    except Exception as exc:  # PDFium raises its own error kinds on damaged pages
        raise ParseError(f"the PDF's scanned pages cannot be rendered for OCR: {exc}") from exc
    for i, (number, png, dpi) in enumerate(rendered, start=1):
        section, note = ocr_page(ocr, png, dpi, (i, len(blank)), number, progress)
        if section is not None:
            out[number] = section
        if note:
            notes.append(f"page {number}: {note}")
    return out
