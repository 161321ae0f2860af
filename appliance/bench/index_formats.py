"""Parse throughput of the Korean office formats, for a row of ``appliance bench index``:
XLSX and CSV in rows per second, HWPX and HWP in paragraphs per second, through ``parse_file``.

The XLSX (4 sheets of 5,000 rows, 8 columns: a roster) and the CSV (5,000 rows, the per-sheet
cap) are generated here; the HWPX is a generated OWPML package of 400 paragraphs and 40 tables
of 20 rows. No library writes binary HWP, so the HWP row reads the real Hancom file the tests
ship (``tests/support/fixtures/hwp``), 200 times: its numbers are for small files.
"""

from __future__ import annotations

import io
import time
import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

import openpyxl

from rag.parsers import parse_file
from rag.parsers.hwp import read_hwp
from rag.parsers.sheets import MAX_ROWS_PER_SHEET

HWP_SAMPLE = Path(__file__).resolve().parents[2] / "tests/support/fixtures/hwp/sample_document.hwp"
_HEADER = ["사번", "이름", "부서", "직급", "입사일", "내선", "근무지", "비고"]
_HP = "http://www.hancom.co.kr/hwpml/2011/paragraph"
_HH = "http://www.hancom.co.kr/hwpml/2011/head"


def _row(i: int) -> list[object]:
    return [
        10_000 + i,
        f"직원{i}",
        f"부서{i % 37}",
        "대리",
        "2021-03-02",
        3000 + i % 900,
        "판교 본사",
        f"출장 {i % 5}회",
    ]


def roster_xlsx(sheets: int = 4, rows: int = MAX_ROWS_PER_SHEET) -> bytes:
    book = openpyxl.Workbook(write_only=True)
    for s in range(sheets):
        sheet = book.create_sheet(f"명단{s + 1}")
        sheet.append(_HEADER)
        for i in range(rows):
            sheet.append(_row(i))
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def roster_csv(rows: int = MAX_ROWS_PER_SHEET) -> bytes:
    lines = [",".join(_HEADER)] + [",".join(map(str, _row(i))) for i in range(rows)]
    return "\n".join(lines).encode()


def _para(text: str, inner: str = "") -> str:
    run = f"<hp:run><hp:t>{escape(text)}</hp:t>{inner}</hp:run>"
    return f'<hp:p paraPrIDRef="0" styleIDRef="0">{run}</hp:p>'


def _table(rows: list[list[object]]) -> str:
    trs = "".join(
        "<hp:tr>"
        + "".join(
            f'<hp:tc><hp:subList>{_para(str(v))}</hp:subList><hp:cellAddr colAddr="{c}" '
            f'rowAddr="{r}"/><hp:cellSpan colSpan="1" rowSpan="1"/></hp:tc>'
            for c, v in enumerate(row)
        )
        + "</hp:tr>"
        for r, row in enumerate(rows)
    )
    return f"<hp:tbl>{trs}</hp:tbl>"


def policy_hwpx(paragraphs: int = 400, tables: int = 40) -> tuple[bytes, int]:
    """An OWPML package and its paragraph count (table cells included)."""
    body, count = [], 0
    for i in range(paragraphs):
        body.append(_para(f"제{i}조 출장 중 숙박비는 1박에 {i % 9 + 8}만 원까지 실비로 지급한다."))
        count += 1
        if i % (paragraphs // tables) == 0:
            rows = [_HEADER] + [_row(k) for k in range(20)]
            body.append(_para("", _table(rows)))
            count += 1 + len(rows) * len(_HEADER)
    xml = f'<hs:sec xmlns:hs="http://www.hancom.co.kr/hwpml/2011/section" xmlns:hp="{_HP}">'
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("mimetype", "application/hwp+zip")
        zf.writestr("Contents/header.xml", f'<hh:head xmlns:hh="{_HH}"/>')
        zf.writestr("Contents/section0.xml", xml + "".join(body) + "</hs:sec>")
    return out.getvalue(), count


def _rate(parse, units: int, rounds: int) -> float:  # noqa: ANN001
    started = time.perf_counter()
    for _ in range(rounds):
        parse()
    return rounds * units / (time.perf_counter() - started)


def measure_formats() -> list[tuple[str, str, float]]:
    """(format, units, units per second) for XLSX, CSV, HWPX and HWP."""
    xlsx, csv = roster_xlsx(), roster_csv()
    hwpx, paragraphs = policy_hwpx()
    rows = []
    rows.append(
        ("XLSX", "rows", _rate(lambda: parse_file("r.xlsx", xlsx), 4 * MAX_ROWS_PER_SHEET, 1))
    )
    rows.append(("CSV", "rows", _rate(lambda: parse_file("r.csv", csv), MAX_ROWS_PER_SHEET, 3)))
    rows.append(("HWPX", "paragraphs", _rate(lambda: parse_file("p.hwpx", hwpx), paragraphs, 3)))
    if HWP_SAMPLE.exists():
        data = HWP_SAMPLE.read_bytes()
        lines = sum(len([x for x in t.splitlines() if x.strip()]) for t in read_hwp(data))
        rows.append(("HWP", "paragraphs", _rate(lambda: parse_file("s.hwp", data), lines, 200)))
    return rows


if __name__ == "__main__":
    for fmt, units, rate in measure_formats():
        print(f"{fmt:5} {rate:12,.0f} {units}/s")
