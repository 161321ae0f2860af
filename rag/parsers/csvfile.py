"""CSV to one section: each row with its column headers, as a spreadsheet sheet is.

The text is decoded as the plain-text formats are (UTF-8, UTF-16 with a BOM, or CP949), and
the delimiter (comma, semicolon, tab or pipe) is sniffed from the first lines.
"""

from __future__ import annotations

import csv
import io

from rag.parsers.encoding import decode_text
from rag.parsers.errors import ParseError
from rag.parsers.sheets import sheet_section
from rag.types import ParsedDocument

MIME = "text/csv"

_DELIMITERS = ",;\t|"


def _dialect(sample: str) -> type[csv.Dialect] | csv.Dialect:
    try:
        return csv.Sniffer().sniff(sample, delimiters=_DELIMITERS)
    except csv.Error:  # one column, or too little to tell
        return csv.excel


def parse_csv(data: bytes, fallback_title: str) -> ParsedDocument:
    """The file as one section headed by its title; the first non-empty row is the header."""
    text = decode_text(data)
    sample = "\n".join(text[:16_384].splitlines()[:20])
    reader = csv.reader(io.StringIO(text, newline=""), _dialect(sample))
    try:
        section, note = sheet_section(fallback_title, reader)
    except csv.Error as exc:
        raise ParseError(f"the CSV is damaged: {exc}") from exc
    sections = (section,) if section is not None else ()
    notes = (note,) if note else ()
    return ParsedDocument(title=fallback_title, sections=sections, mime=MIME, notes=notes)
