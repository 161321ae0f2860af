"""PNG, JPEG and TIFF images to sections by OCR; each frame of a multi-page TIFF is a page.

The image is opened with Pillow and refused with a clear ``ParseError`` when it is damaged or
has more pixels than ``OcrSettings.max_pixels`` (a decompression bomb); without OCR (or without
Tesseract) an image is an error, never an empty document.
"""

from __future__ import annotations

import io
import warnings

from PIL import Image, ImageSequence, UnidentifiedImageError

from rag.ocr import OcrSettings, Progress
from rag.parsers.errors import ParseError
from rag.parsers.ocr_pages import OCR_OFF, ocr_page
from rag.types import ParsedDocument, Section

MAX_FRAMES = 200  # pages of one TIFF
_MIME = {"PNG": "image/png", "JPEG": "image/jpeg", "MPO": "image/jpeg", "TIFF": "image/tiff"}


def _dpi(image: Image.Image) -> int | None:
    """The resolution the image records, when it is a plausible scan's (else Tesseract
    estimates it: phone photos often say 72)."""
    dpi = image.info.get("dpi")
    try:
        value = round(float(dpi[0])) if dpi else 0
    except (TypeError, ValueError, IndexError):
        return None
    return value if 100 <= value <= 1200 else None


def _page_png(frame: Image.Image) -> bytes:
    """One frame as a grayscale PNG (transparency laid on white)."""
    if frame.mode in ("RGBA", "LA", "PA") or "transparency" in frame.info:
        rgba = frame.convert("RGBA")
        flat = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        flat.alpha_composite(rgba)
        frame = flat
    out = io.BytesIO()
    frame.convert("L").save(out, format="PNG")
    return out.getvalue()


def _open(data: bytes) -> Image.Image:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ParseError(f"the image is too large to read ({exc}); refusing") from exc
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise ParseError(f"the image is damaged or not an image: {exc}") from exc
    if image.format not in _MIME:
        raise ParseError(f"the image is {image.format}, not PNG, JPEG or TIFF")
    return image


def _check_size(frame: Image.Image, max_pixels: int) -> None:
    width, height = frame.size
    if width * height > max_pixels:
        raise ParseError(
            f"the image is {width}x{height} pixels ({width * height / 1e6:.0f} megapixels, "
            f"limit {max_pixels / 1e6:.0f}); refusing (decompression bomb?)"
        )
    if width < 1 or height < 1:
        raise ParseError("the image has no pixels")


def parse_image(
    data: bytes,
    fallback_title: str,
    ocr: OcrSettings | None = None,
    progress: Progress | None = None,
) -> ParsedDocument:
    """OCR every page of the image; raise ``ParseError`` when none can be read."""
    if ocr is None:
        raise ParseError(f"an image can only be read by OCR, and {OCR_OFF}")
    image = _open(data)
    mime = _MIME[image.format or "PNG"]
    frames = min(getattr(image, "n_frames", 1), MAX_FRAMES)
    pages: list[tuple[bytes, int | None]] = []
    try:
        for frame in ImageSequence.Iterator(image):
            if len(pages) >= frames:
                break
            _check_size(frame, ocr.max_pixels)
            frame.load()
            pages.append((_page_png(frame), _dpi(frame)))
    except ParseError:
        raise
    except Exception as exc:  # Pillow's decoders raise many kinds on damaged data
        raise ParseError(f"the image is damaged: {exc}") from exc
    sections: list[Section] = []
    notes: list[str] = []
    for i, (png, dpi) in enumerate(pages, start=1):
        page = i if len(pages) > 1 else None
        section, note = ocr_page(ocr, png, dpi, (i, len(pages)), page, progress)
        if section is not None:
            sections.append(section)
        if note:
            notes.append(f"page {i}: {note}" if page else note)
    if not sections:
        why = "; ".join(notes) or "no text was found in it"
        raise ParseError(f"OCR read no text from the image: {why}")
    return ParsedDocument(fallback_title, tuple(sections), mime, notes=tuple(notes))
