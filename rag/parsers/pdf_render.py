"""Render PDF pages to PNG with PDFium (pypdfium2), for OCR of pages without a text layer.

Rendering, rather than pulling the page's embedded images out, gives the page at a known DPI
whatever its images are (JBIG2, CCITT, tiles, masks) and keeps text drawn as outlines.
PDFium is not thread-safe, so one page is rendered at a time in this process.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator, Sequence

_LOCK = threading.Lock()


def render_pages(
    data: bytes, pages: Sequence[int], dpi: int, max_pixels: int
) -> Iterator[tuple[int, bytes, int]]:
    """(page number, grayscale PNG, the DPI it was rendered at) for each 1-based page of
    ``pages``; a page that would exceed ``max_pixels`` is rendered at a lower DPI."""
    import pypdfium2 as pdfium

    with _LOCK:
        document = pdfium.PdfDocument(data)
    try:
        for number in pages:
            with _LOCK:
                page = document[number - 1]
                try:
                    width, height = page.get_size()  # points
                    scale = dpi / 72
                    pixels = width * scale * height * scale
                    if pixels > max_pixels:
                        scale *= (max_pixels / pixels) ** 0.5
                    image = page.render(scale=scale, grayscale=True).to_pil()
                finally:
                    page.close()
            out = io.BytesIO()
            image.save(out, format="PNG")
            yield number, out.getvalue(), round(scale * 72)
    finally:
        with _LOCK:
            document.close()
