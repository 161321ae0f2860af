"""Builders of Korean-office test files with the real libraries: HWPX with python-hwpx,
spreadsheets with openpyxl (encrypted with msoffcrypto-tool), CSV as bytes; and the real HWP
files shipped in ``fixtures/hwp`` (see its README for where they come from)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import openpyxl
from hwpx import HwpxDocument

HWP_DIR = Path(__file__).parent / "fixtures" / "hwp"
Block = str | tuple[str, str] | Sequence[Sequence[str]]  # body text, ("h", heading) or a table


def hwpx_bytes(blocks: Sequence[Block], merge: tuple[int, int, int, int] | None = None) -> bytes:
    """An HWPX: a string is a body paragraph, ("h", text) an 개요 1 heading, a list of rows a
    table (``merge``: (row1, col1, row2, col2) 0-based, merged in the first table)."""
    doc = HwpxDocument.new()
    merged = False
    for block in blocks:
        if isinstance(block, str):
            doc.add_paragraph(block, style_id_ref=0, para_pr_id_ref=0)
        elif isinstance(block, tuple):
            doc.add_heading(block[1], level=1)
        else:
            table = doc.add_table(len(block), len(block[0]))
            for r, row in enumerate(block):
                for c, text in enumerate(row):
                    if text:
                        table.set_cell_text(r, c, text)
            if merge and not merged:
                table.merge_cells(*merge)
                merged = True
    return doc.to_bytes()


def xlsx_bytes(
    sheets: dict[str, list[list[object]]], merges: dict[str, list[str]] | None = None
) -> bytes:
    """An XLSX with one sheet per entry; cells may be formulas ("=B2*2"); ``merges``: ranges."""
    book = openpyxl.Workbook()
    book.remove(book.active)
    for name, rows in sheets.items():
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append(row)
        for ref in (merges or {}).get(name, []):
            sheet.merge_cells(ref)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def with_cached_values(data: bytes, values: dict[str, object]) -> bytes:
    """``data`` with cached values written for its formula cells, as Excel saves them
    (openpyxl writes formulas without a result): {"Sheet!C2": 30}."""
    import re
    import zipfile

    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            body = src.read(info.filename)
            for key, value in values.items():
                sheet, ref = key.split("!")
                index = list(openpyxl.load_workbook(io.BytesIO(data)).sheetnames).index(sheet) + 1
                if info.filename == f"xl/worksheets/sheet{index}.xml":
                    body = re.sub(
                        rf'(<c r="{ref}"[^>]*>)(<f>[^<]*</f>)(<v>[^<]*</v>|<v\s*/>)?'.encode(),
                        lambda m, v=value: m.group(1) + m.group(2) + f"<v>{v}</v>".encode(),
                        body,
                    )
            dst.writestr(info, body)
    return out.getvalue()


def encrypted(data: bytes, password: str = "secret") -> bytes:
    """An Office file encrypted with a password (ECMA-376 agile encryption)."""
    import msoffcrypto.format.ooxml

    out = io.BytesIO()
    msoffcrypto.format.ooxml.OOXMLFile(io.BytesIO(data)).encrypt(password, out)
    return out.getvalue()
