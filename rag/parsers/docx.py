"""DOCX to sections with python-docx: "Heading N" paragraphs start sections, tables as text.

The content must already have passed :func:`rag.parsers.guard.check_content` (type and
zip-bomb limits); this module only reads.
"""

from __future__ import annotations

import io
import re

import docx
from docx.document import Document
from docx.table import Table
from docx.text.paragraph import Paragraph

from rag.parsers.errors import ParseError
from rag.parsers.sections import SectionBuilder
from rag.types import ParsedDocument

MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

_HEADING_STYLE = re.compile(r"^heading\s+(\d)$", re.IGNORECASE)


def _style_name(paragraph: Paragraph) -> str:
    try:
        style = paragraph.style
    except (KeyError, ValueError):  # a style id that the styles part does not define
        return ""
    return (style.name or "") if style is not None else ""


def table_lines(table: Table) -> list[str]:
    """Each row as ``cell | cell``; a merged cell is written once, empty rows dropped."""
    lines = []
    for row in table.rows:
        cells, seen = [], set()
        for cell in row.cells:
            if id(cell._tc) in seen:  # merged cells repeat the same <w:tc>
                continue
            seen.add(id(cell._tc))
            cells.append(" ".join(cell.text.split()))
        if any(cells):
            lines.append(" | ".join(cells))
    return lines


def _open(data: bytes) -> Document:
    try:
        return docx.Document(io.BytesIO(data))
    except Exception as exc:  # python-docx raises many kinds on malformed packages
        raise ParseError(f"the DOCX is damaged or not a DOCX: {exc}") from exc


def parse_docx(data: bytes, fallback_title: str) -> ParsedDocument:
    """Walk body paragraphs and tables in order; headings start sections."""
    document = _open(data)
    title = (document.core_properties.title or "").strip()
    first_h1 = ""
    sections = SectionBuilder()
    try:
        for block in document.iter_inner_content():
            if isinstance(block, Table):
                sections.add(*table_lines(block))
                continue
            text = block.text.strip()
            style = _style_name(block)
            level = _HEADING_STYLE.match(style)
            if style == "Title" and text:
                title = title or text
                sections.start("")
            elif level and text:
                first_h1 = first_h1 or (text if level.group(1) == "1" else "")
                sections.start(text)
            else:
                sections.add(block.text)
    except Exception as exc:
        raise ParseError(f"the DOCX is damaged: {exc}") from exc
    return ParsedDocument(
        title=title or first_h1 or fallback_title, sections=sections.finish(), mime=MIME
    )
