"""XLSX to sections with openpyxl: every sheet, formulas as their cached values.

The workbook is read in openpyxl's streaming (read-only) mode, so a large sheet costs memory for
one row at a time. That mode does not report merged cells, so their ranges are read from the
sheet's XML here (``<mergeCell ref="A2:A4"/>``). The content must already have passed
:func:`rag.parsers.guard.check_content` (type and zip-bomb limits).
"""

from __future__ import annotations

import io
import re
import zipfile
from contextlib import suppress

import openpyxl
from openpyxl.utils.cell import range_boundaries

from rag.parsers.errors import ParseError
from rag.parsers.sheets import Range, fill_merged, sheet_section
from rag.types import ParsedDocument, Section

MIME = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

_MERGE = re.compile(rb'<(?:\w+:)?mergeCell\s[^>]*?ref="([A-Z]+\d+:[A-Z]+\d+)"')
_READ = 1 << 20


def merged_ranges(zf: zipfile.ZipFile, part: str) -> list[Range]:
    """The merged ranges of one sheet part, scanned from its XML in 1 MB pieces."""
    found: list[Range] = []
    tail = b""
    with zf.open(part.lstrip("/")) as f:
        while piece := f.read(_READ):
            buf = tail + piece
            cut = buf.rfind(b"<")  # a tag cut at the end of the piece is scanned next time
            scan, tail = (buf[:cut], buf[cut:]) if cut > 0 else (buf, b"")
            for ref in _MERGE.findall(scan):
                found.append(range_boundaries(ref.decode()))  # (c1, r1, c2, r2)
        found.extend(range_boundaries(r.decode()) for r in _MERGE.findall(tail))
    return [(r1, c1, r2, c2) for c1, r1, c2, r2 in found]


def _open(data: bytes) -> openpyxl.Workbook:
    try:
        return openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises many kinds on malformed packages
        raise ParseError(f"the XLSX is damaged or not an XLSX: {exc}") from exc


def parse_xlsx(data: bytes, fallback_title: str) -> ParsedDocument:
    """One section per sheet (heading: the sheet's name), each row with its column headers."""
    book = _open(data)
    sections: list[Section] = []
    notes: list[str] = []
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            for sheet in book.worksheets:
                if not hasattr(sheet, "iter_rows"):  # a chart sheet
                    continue
                ranges: list[Range] = []
                with suppress(KeyError, AttributeError):
                    ranges = merged_ranges(zf, sheet._worksheet_path)
                rows = fill_merged(sheet.iter_rows(values_only=True), ranges)
                declared = sheet.max_row if isinstance(sheet.max_row, int) else None
                sheet.reset_dimensions()  # a wrong <dimension> must not cut rows off
                section, note = sheet_section(sheet.title, rows, declared_rows=declared)
                sections.extend([section] if section is not None else [])
                notes.extend([note] if note else [])
        title = (book.properties.title or "").strip() if book.properties else ""
    except ParseError:
        raise
    except Exception as exc:
        raise ParseError(f"the XLSX is damaged: {exc}") from exc
    finally:
        book.close()
    return ParsedDocument(
        title=title or fallback_title, sections=tuple(sections), mime=MIME, notes=tuple(notes)
    )
