"""The OCR settings the ingestion worker reads images with, from the ``rag.ocr*`` config."""

from __future__ import annotations

from appliance.core.config import RagConfig
from rag.ocr import OcrSettings, TesseractOcr


def tesseract(rag: RagConfig) -> TesseractOcr:
    """The Tesseract engine the config names (binary, languages, page mode, per-page limit)."""
    return TesseractOcr(
        binary=rag.ocr_binary,
        languages=rag.ocr_languages,
        timeout_s=rag.ocr_timeout_s,
        psm=rag.ocr_psm,
    )


def ocr_settings(rag: RagConfig) -> OcrSettings | None:
    """What the parsers OCR with, or None when ``rag.ocr`` is off."""
    if not rag.ocr:
        return None
    return OcrSettings(
        engine=tesseract(rag), dpi=rag.ocr_dpi, max_pixels=rag.ocr_max_megapixels * 1_000_000
    )
