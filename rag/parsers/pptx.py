"""PPTX to sections with python-pptx: one section per slide, slide number kept as the page.

The content must already have passed :func:`rag.parsers.guard.check_content` (type and
zip-bomb limits); this module only reads.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator

import pptx
from pptx.enum.shapes import MSO_SHAPE_TYPE
from pptx.presentation import Presentation
from pptx.shapes.base import BaseShape
from pptx.slide import Slide

from rag.parsers.errors import ParseError
from rag.types import ParsedDocument, Section

MIME = "application/vnd.openxmlformats-officedocument.presentationml.presentation"


def _shape_lines(shapes: Iterable[BaseShape], skip_id: int | None) -> Iterator[str]:
    """Text of text frames and tables, in the slide's shape order, groups flattened."""
    for shape in shapes:
        if shape.shape_id == skip_id:
            continue
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            yield from _shape_lines(shape.shapes, skip_id)  # type: ignore[attr-defined]
        elif getattr(shape, "has_table", False):
            for row in shape.table.rows:  # type: ignore[attr-defined]
                cells = [" ".join(c.text.split()) for c in row.cells]
                if any(cells):
                    yield " | ".join(cells)
        elif shape.has_text_frame:
            yield from (p.text for p in shape.text_frame.paragraphs)  # type: ignore[attr-defined]


def slide_section(slide: Slide, number: int) -> Section | None:
    """A slide's title as heading; its body text, tables and speaker notes as text."""
    title_shape = slide.shapes.title
    heading = " ".join(title_shape.text_frame.text.split()) if title_shape is not None else ""
    skip = title_shape.shape_id if title_shape is not None else None
    lines = [ln.rstrip() for ln in _shape_lines(slide.shapes, skip) if ln.strip()]
    if slide.has_notes_slide:
        notes = slide.notes_slide.notes_text_frame
        if notes is not None and notes.text.strip():
            lines.append("Notes: " + notes.text.strip())
    body = "\n".join(lines).strip()
    return Section(heading=heading, text=body, page=number) if body else None


def _open(data: bytes) -> Presentation:
    try:
        return pptx.Presentation(io.BytesIO(data))
    except Exception as exc:  # python-pptx raises many kinds on malformed packages
        raise ParseError(f"the PPTX is damaged or not a PPTX: {exc}") from exc


def parse_pptx(data: bytes, fallback_title: str) -> ParsedDocument:
    """One section per slide that has any text besides its title."""
    deck = _open(data)
    sections: list[Section] = []
    first_title = ""
    try:
        for number, slide in enumerate(deck.slides, start=1):
            section = slide_section(slide, number)
            if not first_title and slide.shapes.title is not None:
                first_title = " ".join(slide.shapes.title.text_frame.text.split())
            if section is not None:
                sections.append(section)
        title = (deck.core_properties.title or "").strip()
    except Exception as exc:
        raise ParseError(f"the PPTX is damaged: {exc}") from exc
    return ParsedDocument(
        title=title or first_title or fallback_title, sections=tuple(sections), mime=MIME
    )
