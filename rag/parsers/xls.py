"""Legacy Excel (.xls, BIFF) to sections with xlrd: every sheet, merged cells filled in.

xlrd reads cached formula values, as Excel saved them. An encrypted workbook is refused as a
protected document.
"""

from __future__ import annotations

import xlrd

from rag.parsers.errors import ParseError
from rag.parsers.sheets import Range, fill_merged, sheet_section
from rag.types import ParsedDocument, Section

MIME = "application/vnd.ms-excel"


def _value(book: xlrd.Book, cell: xlrd.sheet.Cell) -> object:
    if cell.ctype == xlrd.XL_CELL_DATE:
        try:
            return xlrd.xldate.xldate_as_datetime(cell.value, book.datemode)
        except (ValueError, OverflowError):
            return cell.value
    if cell.ctype == xlrd.XL_CELL_BOOLEAN:
        return bool(cell.value)
    if cell.ctype == xlrd.XL_CELL_ERROR:
        return None
    return cell.value


def _open(data: bytes) -> xlrd.Book:
    try:
        return xlrd.open_workbook(file_contents=data, formatting_info=True, on_demand=True)
    except xlrd.XLRDError as exc:
        if "encrypt" in str(exc).lower():
            raise ParseError(
                "the XLS is a protected document (password-encrypted); "
                "save it without a password to index it"
            ) from exc
        raise ParseError(f"the XLS is damaged or not an XLS: {exc}") from exc
    except Exception as exc:
        raise ParseError(f"the XLS is damaged or not an XLS: {exc}") from exc


def parse_xls(data: bytes, fallback_title: str) -> ParsedDocument:
    """One section per sheet (heading: the sheet's name), each row with its column headers."""
    book = _open(data)
    sections: list[Section] = []
    notes: list[str] = []
    try:
        for index in range(book.nsheets):
            sheet = book.sheet_by_index(index)
            # xlrd's merged ranges are 0-based and half-open: (r1, r2, c1, c2)
            ranges: list[Range] = [
                (r1 + 1, c1 + 1, r2, c2) for r1, r2, c1, c2 in sheet.merged_cells
            ]
            rows = ([_value(book, c) for c in sheet.row(r)] for r in range(sheet.nrows))
            section, note = sheet_section(sheet.name, fill_merged(rows, ranges))
            sections.extend([section] if section is not None else [])
            notes.extend([note] if note else [])
            book.unload_sheet(index)
    except Exception as exc:
        raise ParseError(f"the XLS is damaged: {exc}") from exc
    finally:
        book.release_resources()
    return ParsedDocument(
        title=fallback_title, sections=tuple(sections), mime=MIME, notes=tuple(notes)
    )
