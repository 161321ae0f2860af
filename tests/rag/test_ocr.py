"""OCR: Tesseract's TSV, accuracy on rendered 200-dpi pages (English and Korean, NanumGothic),
image-only and mixed PDFs, images, time limits, bad input, and a missing Tesseract."""

from __future__ import annotations

import io
import shutil
import struct
import zlib

import pytest
from fpdf import FPDF
from PIL import Image

from appliance.bench.ocr_pages import (
    ENGLISH_PAGE,
    KOREAN_FONT,
    KOREAN_PAGE,
    char_accuracy,
    levenshtein,
    photographed,
    png_bytes,
    render_page,
    scanned_pdf,
)
from appliance.core.config import RagConfig
from appliance.core.services.ocr import ocr_settings
from rag.ocr import OcrResult, OcrSettings, OcrTimeout, TesseractOcr, parse_tsv
from rag.parsers import ParseError, parse_file

needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None,
    reason="tesseract is not installed (apt-get install tesseract-ocr tesseract-ocr-kor "
    "tesseract-ocr-eng; scripts/test.sh does as root)",
)
needs_font = pytest.mark.skipif(
    not KOREAN_FONT.is_file(), reason=f"{KOREAN_FONT} missing (apt-get install fonts-nanum)"
)

TSV = (
    "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext\n"
    "1\t1\t0\t0\t0\t0\t0\t0\t100\t100\t-1\t\n"
    "5\t1\t1\t1\t1\t1\t0\t0\t10\t10\t90\tHello\n"
    "5\t1\t1\t1\t1\t2\t0\t0\t10\t10\t80\tworld\n"
    "5\t1\t1\t1\t2\t1\t0\t0\t10\t10\t-1\t \n"
    "5\t1\t1\t1\t2\t1\t0\t0\t10\t10\t60\tab\n"
    "5\t1\t2\t1\t1\t1\t0\t0\t10\t10\t100\t안내\n"
)


@pytest.fixture(scope="module")
def settings() -> OcrSettings:
    config = ocr_settings(RagConfig())
    assert config is not None
    return config


class CountingOcr:
    """A stand-in engine that records the pages it is given."""

    def __init__(self, text: str = "Scanned page\nThe fact is here.", fail: bool = False) -> None:
        self.calls = 0
        self.text, self.fail = text, fail

    def read(self, png: bytes, dpi: int | None = None) -> OcrResult:
        self.calls += 1
        Image.open(io.BytesIO(png)).verify()  # it was given a real image
        if self.fail:
            raise OcrTimeout("over the 1 s per-page limit")
        return OcrResult(self.text, 0.9, 0.01)


def mixed_pdf(scan: Image.Image) -> bytes:
    """Page 1 has a text layer, page 2 is only an image."""
    pdf = FPDF(unit="pt", format="A4")
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.multi_cell(0, 14, "Typed page\nThe typed page has a text layer.")
    pdf.add_page()
    pdf.image(io.BytesIO(png_bytes(scan, 200)), x=0, y=0, w=595)
    return bytes(pdf.output())


def test_tsv_is_read_into_lines_and_a_character_weighted_confidence() -> None:
    text, confidence = parse_tsv(TSV)
    assert text == "Hello world\nab\n\n안내"
    assert confidence == pytest.approx((90 * 5 + 80 * 5 + 60 * 2 + 100 * 2) / 14 / 100, abs=1e-4)
    assert parse_tsv(TSV.splitlines()[0]) == ("", None)


def test_character_accuracy_is_one_minus_edit_distance_over_length() -> None:
    assert levenshtein("kitten", "sitting") == 3
    assert char_accuracy("a  b\nc", "a b c") == 1.0
    assert char_accuracy("abcd", "abce") == 0.75
    assert char_accuracy("", "abc") == 0.0


@needs_tesseract
@needs_font
@pytest.mark.parametrize("truth", [ENGLISH_PAGE, KOREAN_PAGE], ids=["english", "korean"])
def test_rendered_200_dpi_pages_are_read_at_95_percent_or_better(settings, truth) -> None:  # noqa: ANN001
    doc = parse_file("page.png", png_bytes(render_page(truth, 200), 200), ocr=settings)
    [section] = doc.sections
    assert char_accuracy(f"{section.heading}\n{section.text}", truth) >= 0.95
    assert section.ocr_confidence is not None and 0.7 < section.ocr_confidence <= 1
    assert doc.mime == "image/png" and section.page is None


@needs_tesseract
@needs_font
def test_a_scanned_pdf_is_read_page_by_page_with_progress_lines(settings) -> None:  # noqa: ANN001
    lines: list[str] = []
    data = scanned_pdf([render_page(ENGLISH_PAGE), render_page(KOREAN_PAGE)])
    doc = parse_file("scan.pdf", data, ocr=settings, progress=lines.append)
    assert [s.page for s in doc.sections] == [1, 2]
    assert doc.sections[0].heading == "Quarterly Maintenance Notice"
    assert "엘리베이터" in doc.sections[1].text
    assert [ln.split(":")[0] for ln in lines] == ["OCR page 1/2", "OCR page 2/2"]
    assert all("confidence" in ln and ln.endswith(" s") for ln in lines)


@needs_font
def test_a_mixed_pdf_ocrs_only_its_image_page() -> None:
    engine = CountingOcr()
    doc = parse_file("mixed.pdf", mixed_pdf(render_page(ENGLISH_PAGE)), ocr=OcrSettings(engine))
    assert engine.calls == 1
    typed, scanned = doc.sections
    assert (typed.page, typed.ocr_confidence) == (1, None)
    assert "text layer" in typed.text
    assert (scanned.page, scanned.ocr_confidence) == (2, 0.9)
    assert scanned.text == "The fact is here."


@needs_font
def test_a_page_over_the_time_limit_is_skipped_with_a_note() -> None:
    lines: list[str] = []
    settings = OcrSettings(CountingOcr(fail=True))
    doc = parse_file("mixed.pdf", mixed_pdf(render_page(ENGLISH_PAGE)), ocr=settings,
                     progress=lines.append)  # fmt: skip
    assert [s.page for s in doc.sections] == [1]
    assert doc.notes == ("page 2: not read by OCR: over the 1 s per-page limit",)
    assert lines == ["OCR page 1/1 not read by OCR: over the 1 s per-page limit"]
    with pytest.raises(ParseError, match="per-page limit"):  # nothing read: never empty
        parse_file("scan.pdf", scanned_pdf([render_page(ENGLISH_PAGE)]), ocr=settings)


@needs_tesseract
def test_tesseract_stops_at_the_per_page_limit() -> None:
    page = png_bytes(render_page(ENGLISH_PAGE * 3), 200)
    with pytest.raises(OcrTimeout, match="0.01 s per-page limit"):
        TesseractOcr(timeout_s=0.01).read(page, 200)


def test_without_tesseract_an_image_names_the_packages_to_install() -> None:
    missing = OcrSettings(TesseractOcr(binary="/nonexistent/tesseract"))
    page = png_bytes(Image.new("L", (40, 20), 255))
    with pytest.raises(ParseError, match="tesseract-ocr tesseract-ocr-kor"):
        parse_file("notice.png", page, ocr=missing)
    with pytest.raises(ParseError, match="tesseract-ocr-kor"):
        parse_file("scan.pdf", scanned_pdf([Image.new("L", (40, 20), 255)]), ocr=missing)


def test_with_ocr_off_an_image_only_file_is_an_error_that_says_so() -> None:
    with pytest.raises(ParseError, match=r"OCR is turned off \(rag.ocr = false\)"):
        parse_file("notice.png", png_bytes(Image.new("L", (40, 20), 255)))
    with pytest.raises(ParseError, match="no text layer"):
        parse_file("scan.pdf", scanned_pdf([Image.new("L", (40, 20), 255)]))


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _png_header(width: int, height: int) -> bytes:
    """A PNG that declares ``width`` x ``height`` and holds almost no pixels (a bomb's header)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 64)
    return (
        b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")
    )


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("empty.png", b"", "the file is empty"),
        ("broken.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "damaged"),
        ("broken.jpg", b"\xff\xd8\xff\xe0" + b"\x13" * 64, "damaged"),
        ("notes.png", b"just some text, not an image", "not a PNG, JPEG or TIFF image"),
        ("bomb.png", _png_header(100_000, 100_000), "too large|megapixels"),
        ("big.png", _png_header(8000, 6000), "48 megapixels, limit 40"),
    ],
)
def test_bad_images_get_a_clear_error(name: str, data: bytes, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_file(name, data, ocr=OcrSettings(CountingOcr()))


def test_jpeg_and_multi_page_tiff_are_read_page_by_page() -> None:
    engine = CountingOcr()
    page = Image.new("L", (60, 30), 255)
    jpeg = io.BytesIO()
    page.save(jpeg, format="JPEG")
    doc = parse_file("notice.jpg", jpeg.getvalue(), ocr=OcrSettings(engine))
    assert (doc.mime, doc.sections[0].page) == ("image/jpeg", None)
    tiff = io.BytesIO()
    page.save(tiff, format="TIFF", save_all=True, append_images=[page.copy()])
    doc = parse_file("scan.tiff", tiff.getvalue(), ocr=OcrSettings(engine))
    assert doc.mime == "image/tiff" and [s.page for s in doc.sections] == [1, 2]
    assert engine.calls == 3


@needs_tesseract
@needs_font
def test_a_photographed_notice_is_read(settings) -> None:  # noqa: ANN001
    photo = png_bytes(photographed(render_page(KOREAN_PAGE)))  # no DPI recorded
    [section] = parse_file("notice.png", photo, ocr=settings).sections
    assert char_accuracy(f"{section.heading}\n{section.text}", KOREAN_PAGE) >= 0.9
    assert "하역장" in section.text
