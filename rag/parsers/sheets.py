"""One spreadsheet sheet to one section (pure): a header row, then one keyed line per row.

Used by the XLSX, XLS and CSV parsers, which only turn their format into rows of cell values.
Empty rows are skipped, a lone title cell above the header is kept as text, and a sheet longer
than ``MAX_ROWS_PER_SHEET`` data rows is cut there, with a last line saying so.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain

from rag.parsers.rows import clean, headers_for, is_title_row, keyed_line
from rag.types import Section

MAX_ROWS_PER_SHEET = 5_000

# (first row, first column, last row, last column), 1-based and inclusive, like openpyxl's
Range = tuple[int, int, int, int]


def format_cell(value: object) -> str:
    """A cell value as text: whole floats without ``.0``, dates without a midnight time."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    if isinstance(value, dt.datetime):
        return value.date().isoformat() if value.time() == dt.time() else value.isoformat(" ")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return clean(value)


def fill_merged(rows: Iterable[Sequence[object]], ranges: Sequence[Range]) -> Iterator[list]:
    """Rows with each merged range's top-left value copied into every cell it covers, so a
    vertically merged "Route" cell is part of each row it spans."""
    by_start: dict[int, list[Range]] = {}
    for r in ranges:
        by_start.setdefault(r[0], []).append(r)
    active: list[tuple[Range, object]] = []
    for number, row in enumerate(rows, start=1):
        cells = list(row)
        for r in by_start.get(number, ()):
            value = cells[r[1] - 1] if r[1] - 1 < len(cells) else None
            active.append((r, value))
        active = [(r, v) for r, v in active if r[2] >= number]
        for (_, c1, _, c2), value in active:
            if len(cells) < c2:
                cells.extend([None] * (c2 - len(cells)))
            for col in range(c1 - 1, c2):
                cells[col] = value
        yield cells


def sheet_section(
    name: str,
    rows: Iterable[Sequence[object]],
    *,
    max_rows: int = MAX_ROWS_PER_SHEET,
    declared_rows: int | None = None,
) -> tuple[Section | None, str | None]:
    """The sheet as a section headed by its name (``None`` when it has no text), and a note for
    the admin when the sheet was cut at ``max_rows`` data rows (else ``None``).

    ``declared_rows`` (the sheet's own row count, where the format has one) goes into the note.
    """
    texts = ([format_cell(c) for c in row] for row in rows)
    filled = (row for row in texts if any(row))
    lines: list[str] = []
    pending = next(filled, None)
    following = next(filled, None)
    while pending is not None and is_title_row(pending, following):
        lines.append(next(c for c in pending if c))
        pending, following = following, next(filled, None)
    if pending is None:
        return (Section(heading=name, text="\n".join(lines)) if lines else None), None
    headers = headers_for(pending)
    lines.append("Columns: " + ", ".join(c for c in pending if c))
    note = None
    rest = chain([following] if following is not None else [], filled)
    for count, row in enumerate(rest):
        if count == max_rows:
            of = f" of about {declared_rows:,}" if declared_rows else ""
            note = f"sheet {name!r}: only the first {max_rows:,} rows{of} were read"
            lines.append(f"(This sheet was cut at {max_rows:,} rows{of}; the rest was not read.)")
            break
        lines.append(keyed_line(headers, row))
    return Section(heading=name, text="\n".join(lines)), note
