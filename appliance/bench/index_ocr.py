"""The OCR row of ``appliance bench index``: pages per second through the real ingestion path
(a scanned PDF rendered and read by Tesseract) and character accuracy against the known text of
rendered 200-dpi test pages, English and Korean."""

from __future__ import annotations

import time

from appliance.bench.ocr_pages import (
    ENGLISH_PAGE,
    KOREAN_PAGE,
    char_accuracy,
    render_page,
    scanned_pdf,
)
from appliance.core.config import RagConfig
from appliance.core.services.ocr import ocr_settings
from rag.parsers import parse_file


def _page_text(heading: str, text: str) -> str:
    return f"{heading}\n{text}" if heading else text


def measure_ocr(rag: RagConfig, rounds: int = 1) -> tuple[float, float, float]:
    """(pages per second, accuracy English, accuracy Korean): a two-page scanned PDF (one
    English, one Korean page at 200 dpi) parsed ``rounds`` times with the config's OCR.
    Raises ``rag.parsers.ParseError`` when OCR is off or Tesseract is missing."""
    settings = ocr_settings(rag.model_copy(update={"ocr": True}))
    assert settings is not None
    truths = (ENGLISH_PAGE, KOREAN_PAGE)
    data = scanned_pdf([render_page(t, 200) for t in truths], 200)
    started = time.perf_counter()
    for _ in range(rounds):
        doc = parse_file("ocr-bench.pdf", data, ocr=settings)
    elapsed = time.perf_counter() - started
    read = {s.page: _page_text(s.heading, s.text) for s in doc.sections}
    accuracy = [char_accuracy(read.get(page, ""), truth) for page, truth in enumerate(truths, 1)]
    return rounds * len(truths) / elapsed, accuracy[0], accuracy[1]
