"""Tables as facts (pure): each row rendered with its column headers, one line per row.

``Route: Gangnam loop, Departure: 08:15`` is a line a question can retrieve on its own, where a
bare ``Gangnam loop | 08:15`` loses what its values mean once the chunker cuts the table. Shared
by the spreadsheet, CSV and Hancom (HWP/HWPX) parsers; cells come in as text already.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Row = Sequence[str]


def clean(cell: object) -> str:
    """A cell as one line of text: whitespace runs (newlines too) become one space."""
    return " ".join(str(cell).split()) if cell is not None else ""


def column_name(index: int) -> str:
    """Spreadsheet column letters for a 0-based index: 0 -> A, 27 -> AB."""
    name = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        name = chr(ord("A") + rest) + name
    return name


def headers_for(row: Row) -> list[str]:
    """Header names: blank ones are named by their column letter, and a header repeated by a
    merged cell keeps one name per column, so every value has a key."""
    return [cell or f"Column {column_name(i)}" for i, cell in enumerate(row)]


def keyed_line(headers: Sequence[str], row: Row) -> str:
    """``Header: value, Header: value`` for the non-empty cells; a value repeated under the same
    header (a merged cell spread over columns) is written once."""
    parts: list[str] = []
    last: tuple[str, str] | None = None
    for i, value in enumerate(row):
        if not value:
            continue
        key = headers[i] if i < len(headers) else f"Column {column_name(i)}"
        if (key, value) == last:
            continue
        last = (key, value)
        parts.append(value if key == value else f"{key}: {value}")
    return ", ".join(parts)


def is_title_row(row: Row, following: Row | None) -> bool:
    """One value (a lone cell, or one cell merged across) above a wider row: a sheet's or a
    table's title, which is text, not the header."""
    lone = len({c for c in row if c}) == 1
    return lone and following is not None and len({c for c in following if c}) > 1


def table_lines(rows: Iterable[Row]) -> list[str]:
    """A small table (HWP/HWPX) as lines: title rows as text, then one keyed line per row.

    The first row with more than one cell is the header. A one-column table has no header:
    its cells are plain lines.
    """
    grid = [[clean(c) for c in row] for row in rows]
    grid = [row for row in grid if any(row)]
    lines: list[str] = []
    while grid and is_title_row(grid[0], grid[1] if len(grid) > 1 else None):
        lines.append(next(c for c in grid.pop(0) if c))
    if not grid:
        return lines
    if max(len(r) for r in grid) == 1 or len(grid) == 1:
        return lines + [" | ".join(c for c in row if c) for row in grid]
    headers = headers_for(grid[0])
    lines.append(" | ".join(c for c in grid[0] if c))
    lines.extend(line for row in grid[1:] if (line := keyed_line(headers, row)))
    return lines
