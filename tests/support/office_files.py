"""Builders of real office files for the parser tests, made with the real libraries."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import docx
import pptx
from fpdf import FPDF
from pptx.util import Inches
from pypdf import PdfReader, PdfWriter

KOREAN_FONTS = (
    "/usr/share/fonts/truetype/nanum/NanumGothic.ttf",
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/truetype/noto/NotoSansKR-Regular.ttf",
)


def pdf_bytes(pages: list[tuple[str, str]], title: str = "", font: str | None = None) -> bytes:
    """A PDF with one (heading, body) per page; a core font unless a TTF path is given."""
    pdf = FPDF()
    if title:
        pdf.set_title(title)
    family = "Helvetica"
    if font:
        pdf.add_font("custom", fname=font)
        family = "custom"
    for heading, body in pages:
        pdf.add_page()
        pdf.set_font(family, size=16)
        pdf.cell(text=heading)
        pdf.ln(12)
        pdf.set_font(family, size=11)
        pdf.multi_cell(w=0, text=body)
    return bytes(pdf.output())


def blank_pdf_bytes(pages: int = 2) -> bytes:
    """A PDF whose pages carry no text layer, like a scan."""
    pdf = FPDF()
    for _ in range(pages):
        pdf.add_page()
        pdf.rect(20, 20, 100, 60)
    return bytes(pdf.output())


def encrypted_pdf_bytes(plain: bytes, user_password: str) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(plain)))
    writer.encrypt(user_password=user_password, owner_password="owner-secret")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def docx_bytes(core_title: str = "") -> bytes:
    d = docx.Document()
    if core_title:
        d.core_properties.title = core_title
    d.add_paragraph("Travel Policy", style="Title")
    d.add_paragraph("This policy covers business travel.")
    d.add_heading("Booking", level=1)
    d.add_paragraph("Book flights through the portal.")
    d.add_heading("Hotels", level=2)
    d.add_paragraph("Stay at approved hotels.")
    table = d.add_table(rows=3, cols=2)
    for r, (city, limit) in enumerate([("City", "Nightly limit"), ("Seoul", "200,000 KRW")]):
        table.cell(r, 0).text = city
        table.cell(r, 1).text = limit
    d.add_heading("Expenses", level=1)
    d.add_paragraph("Submit receipts within 30 days.")
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def pptx_bytes() -> bytes:
    deck = pptx.Presentation()
    layout = deck.slide_layouts[1]  # Title and Content
    slides = [
        ("Quarterly Review", "Revenue grew 12%", "Mention the new region."),
        ("Next Steps", "Hire two engineers", "Ask for budget approval."),
    ]
    for title, body, notes in slides:
        slide = deck.slides.add_slide(layout)
        slide.shapes.title.text = title
        slide.placeholders[1].text_frame.text = body
        slide.notes_slide.notes_text_frame.text = notes
    table = deck.slides[1].shapes.add_table(2, 2, Inches(1), Inches(4), Inches(4), Inches(1))
    for r, row in enumerate([("Role", "Count"), ("Engineer", "2")]):
        for c, value in enumerate(row):
            table.table.cell(r, c).text = value
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def zip_bomb_docx(path: Path, unpacked_mb: int) -> bytes:
    """A zip with a valid-looking DOCX layout whose document.xml is ``unpacked_mb`` of zeros."""
    chunk = b"\x00" * (1024 * 1024)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        with zf.open("word/document.xml", "w", force_zip64=True) as member:
            for _ in range(unpacked_mb):
                member.write(chunk)
    return path.read_bytes()


def korean_font() -> str | None:
    return next((f for f in KOREAN_FONTS if Path(f).is_file()), None)
