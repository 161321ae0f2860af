"""One page image through OCR: the page's section, or a note saying why it was skipped.

A page over the per-page time limit (or one Tesseract fails on) is skipped with a note; a
missing Tesseract fails the whole file with a ``ParseError`` that names the Debian packages,
so an image-only file is never silently empty. Each page reports one progress line.
"""

from __future__ import annotations

import dataclasses

from rag.ocr import OcrError, OcrSettings, OcrUnavailable, Progress
from rag.parsers.errors import ParseError
from rag.parsers.page_text import page_section
from rag.types import Section

OCR_OFF = "OCR is turned off (rag.ocr = false)"


def ocr_page(
    settings: OcrSettings,
    png: bytes,
    dpi: int | None,
    at: tuple[int, int],
    page: int | None,
    progress: Progress | None = None,
) -> tuple[Section | None, str]:
    """OCR one page image; ``at`` is (this page's number among those OCR'd, how many).

    Returns the page's section (None when no text was read) and a note ('' when none).
    Raises ``ParseError`` when OCR is not installed.
    """
    label = f"OCR page {at[0]}/{at[1]}"
    try:
        result = settings.engine.read(png, dpi)
    except OcrUnavailable as exc:
        raise ParseError(f"this file needs OCR, but {exc}") from exc
    except OcrError as exc:
        note = f"not read by OCR: {exc}"
        if progress:
            progress(f"{label} {note}")
        return None, note
    conf = f"{result.confidence:.0%}" if result.confidence is not None else "no"
    if progress:
        progress(f"{label}: {len(result.text)} chars, {conf} confidence, {result.seconds:.1f} s")
    section = page_section(result.text, page)
    if section is None:
        return None, ""
    return dataclasses.replace(section, ocr_confidence=result.confidence), ""
