"""Scans and photos through the real appliance: OCR'd at ingestion (Tesseract), stored with their
confidence, found by the chat, and shown as 'read by OCR' in the source view; bad images in the
same batch get clear errors while the rest is ingested."""

from __future__ import annotations

import shutil
from dataclasses import asdict
from pathlib import Path

import pytest
from sqlalchemy import select
from support.appliances import build_small_appliance

from appliance.bench.ocr_pages import (
    KOREAN_FONT,
    photographed,
    png_bytes,
    render_page,
    scanned_pdf,
)
from appliance.core.db.models import Chunk, Document
from appliance.core.services.chat import RetrievalEvent
from ui.format import citations_html

pytestmark = [
    pytest.mark.skipif(
        shutil.which("tesseract") is None,
        reason="tesseract is not installed (apt-get install tesseract-ocr tesseract-ocr-kor "
        "tesseract-ocr-eng; scripts/test.sh does as root)",
    ),
    pytest.mark.skipif(not KOREAN_FONT.is_file(), reason="apt-get install fonts-nanum"),
]

ENGLISH_SCAN = (
    "Vending Machine Refunds\n"
    "Refunds for the third floor vending machine\n"
    "are paid at the reception desk in room 314."
)
KOREAN_SCAN = "사내 도서관 대출 안내\n도서 대출 기간은 최대 21일이며\n한 번 연장할 수 있습니다."
NOTICE = "NOTICE\nThe bicycle repair day is held\nevery second Thursday in the north courtyard."


@pytest.fixture(scope="module")
def box(tmp_path_factory, model_dir, engine, embedder, config_for):  # noqa: ANN001, ANN201
    root = tmp_path_factory.mktemp("ocr-ingest")
    appliance = build_small_appliance(root / "data", model_dir, engine, embedder, config_for)
    files = root / "inbox"
    files.mkdir()
    (files / "a-refunds-scan.pdf").write_bytes(scanned_pdf([render_page(ENGLISH_SCAN)]))
    (files / "b-broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40)
    (files / "c-empty.jpg").write_bytes(b"")
    big = Path(files / "d-huge.tiff")
    # 9000 x 9000 one-bit pixels: a small file, 81 megapixels (limit 40)
    from PIL import Image

    Image.new("1", (9000, 9000), 1).save(big, format="TIFF", compression="group4")
    (files / "e-library-scan.pdf").write_bytes(scanned_pdf([render_page(KOREAN_SCAN)]))
    (files / "f-notice-photo.png").write_bytes(png_bytes(photographed(render_page(NOTICE))))
    results = appliance.ingest.ingest_folder(files)
    yield appliance, {r.name: r for r in results}
    appliance.db.dispose()


@pytest.fixture(scope="module")
def staff(box):  # noqa: ANN001, ANN201
    return box[0].auth.create_user("ocr-reader", "password-123", role="staff")


def test_bad_images_fail_clearly_and_the_rest_of_the_batch_is_ingested(box) -> None:  # noqa: ANN001
    _appliance, results = box
    assert {n: r.status for n, r in results.items()} == {
        "a-refunds-scan.pdf": "indexed",
        "b-broken.png": "error",
        "c-empty.jpg": "error",
        "d-huge.tiff": "error",
        "e-library-scan.pdf": "indexed",
        "f-notice-photo.png": "indexed",
    }
    assert "damaged" in results["b-broken.png"].error
    assert results["c-empty.jpg"].error == "the file is empty"
    assert "81 megapixels, limit 40" in results["d-huge.tiff"].error


def test_ocr_chunks_keep_their_confidence(box) -> None:  # noqa: ANN001
    appliance, _results = box
    with appliance.db.session() as s:
        rows = s.execute(select(Document.source_path, Chunk.ocr_confidence).join(Chunk)).all()
    assert {name for name, _ in rows} == {
        "a-refunds-scan.pdf",
        "e-library-scan.pdf",
        "f-notice-photo.png",
    }
    assert all(conf is not None and 0.5 < conf <= 1 for _, conf in rows)


@pytest.mark.parametrize(
    ("question", "fact", "source"),
    [
        ("Where are vending machine refunds paid?", "room 314", "a-refunds-scan.pdf"),
        ("도서 대출 기간은 최대 며칠입니까?", "21일", "e-library-scan.pdf"),
        ("When is the bicycle repair day held?", "second Thursday", "f-notice-photo.png"),
    ],
    ids=["english-scan", "korean-scan", "photographed-notice"],
)
def test_a_fact_only_in_a_scan_is_found_by_the_chat(box, staff, question, fact, source) -> None:  # noqa: ANN001
    appliance, _results = box
    events = list(appliance.chat.ask(staff, question))
    retrieval = next(e for e in events if isinstance(e, RetrievalEvent))
    on_card = any(fact in s.text for s in retrieval.evidence)
    cited = [c for c in retrieval.citations if fact in c.text]
    assert on_card or cited, (question, [c.text for c in retrieval.citations])
    citation = next(c for c in retrieval.citations if c.source == source)
    assert citation.ocr_confidence is not None and citation.ocr_confidence > 0.5
    shown = citations_html([asdict(citation)], "en")
    assert f"read by OCR, {round(citation.ocr_confidence * 100)}% confidence" in shown
    assert "OCR로 읽음" in citations_html([asdict(citation)], "ko")
