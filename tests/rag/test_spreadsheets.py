"""XLSX, XLS-by-signature and CSV through ``parse_file``: every sheet, rows keyed by their
headers, merged cells, formulas' cached values, empty rows, the row cap, and bad files."""

from __future__ import annotations

import io
import zipfile

import pytest
from support.korean_office import encrypted, with_cached_values, xlsx_bytes

from rag.parsers import ParseError, parse_file
from rag.parsers.guard import GuardLimits
from rag.parsers.sheets import MAX_ROWS_PER_SHEET, sheet_section

TIMETABLE = [
    ["2024 셔틀버스 시간표"],  # a title row merged over the table
    ["노선", "출발", "도착"],
    ["강남 순환", "08:15", "08:50"],
    [None, "09:15", "09:50"],  # the route cell is merged over both rows
    [],
    ["판교 직행", "07:40", None],
]


def texts(doc) -> dict[str, str]:  # noqa: ANN001
    return {s.heading: s.text for s in doc.sections}


def test_every_sheet_with_headers_merged_cells_and_empty_rows() -> None:
    data = xlsx_bytes(
        {"요약": [["항목", "값"], ["부서", "총무팀"]], "셔틀": TIMETABLE},
        merges={"셔틀": ["A1:C1", "A3:A4"]},
    )
    doc = parse_file("shuttle.xlsx", data)
    sheets = texts(doc)
    assert list(sheets) == ["요약", "셔틀"]
    assert sheets["요약"].splitlines()[-1] == "항목: 부서, 값: 총무팀"
    lines = sheets["셔틀"].splitlines()
    assert lines[0] == "2024 셔틀버스 시간표"
    assert lines[1] == "Columns: 노선, 출발, 도착"
    assert lines[2:] == [
        "노선: 강남 순환, 출발: 08:15, 도착: 08:50",
        "노선: 강남 순환, 출발: 09:15, 도착: 09:50",  # merged down
        "노선: 판교 직행, 출발: 07:40",  # the empty row is gone, the empty cell left out
    ]


def test_formulas_read_as_their_cached_values() -> None:
    rows = [["품목", "단가", "수량", "합계"], ["복사용지", 25000, 4, "=B2*C2"]]
    data = with_cached_values(xlsx_bytes({"예산": rows}), {"예산!D2": 100000})
    line = texts(parse_file("budget.xlsx", data))["예산"].splitlines()[-1]
    assert line == "품목: 복사용지, 단가: 25000, 수량: 4, 합계: 100000"
    assert "B2*C2" not in line


def test_a_long_sheet_is_cut_at_the_cap_and_says_so() -> None:
    rows = [["번호", "이름"]] + [[i, f"직원{i}"] for i in range(1, MAX_ROWS_PER_SHEET + 11)]
    doc = parse_file("roster.xlsx", xlsx_bytes({"명단": rows}))
    lines = texts(doc)["명단"].splitlines()
    assert lines[-2] == f"번호: {MAX_ROWS_PER_SHEET}, 이름: 직원{MAX_ROWS_PER_SHEET}"
    assert "cut at 5,000 rows" in lines[-1]
    assert doc.notes and "명단" in doc.notes[0] and "5,000" in doc.notes[0]


def test_sheet_section_cap_is_a_parameter() -> None:
    section, note = sheet_section("s", [["a", "b"], [1, 2], [3, 4], [5, 6]], max_rows=2)
    assert section.text.splitlines()[1:3] == ["a: 1, b: 2", "a: 3, b: 4"]
    assert note == "sheet 's': only the first 2 rows were read"


def test_csv_rows_keyed_by_headers_in_cp949_and_with_semicolons() -> None:
    csv = "노선;출발\n강남 순환;08:15\n\n판교 직행;07:40\n".encode("cp949")
    doc = parse_file("셔틀.csv", csv)
    assert doc.sections[0].heading == "셔틀"
    assert doc.sections[0].text.splitlines()[1:] == [
        "노선: 강남 순환, 출발: 08:15",
        "노선: 판교 직행, 출발: 07:40",
    ]


def test_csv_with_quoted_commas_and_a_short_row() -> None:
    doc = parse_file("x.csv", b'name,note,room\n"Kim, J.","says ""hi""",\n')
    assert doc.sections[0].text.splitlines()[-1] == 'name: Kim, J., note: says "hi"'


def test_encrypted_xlsx_is_a_protected_document() -> None:
    data = encrypted(xlsx_bytes({"s": [["a"], ["b"]]}))
    with pytest.raises(ParseError, match="protected document"):
        parse_file("secret.xlsx", data)


@pytest.mark.parametrize("name", ["a.xlsx", "a.xls", "a.csv"])
def test_empty_files_are_refused(name: str) -> None:
    with pytest.raises(ParseError, match="empty"):
        parse_file(name, b"")


def test_corrupt_files_are_refused() -> None:
    good = xlsx_bytes({"s": [["a"], ["b"]]})
    with pytest.raises(ParseError, match="damaged|not an XLSX"):
        parse_file("cut.xlsx", good[: len(good) // 2])
    with pytest.raises(ParseError, match="not a XLS"):
        parse_file("renamed.xls", good)  # a zip is not a BIFF workbook
    with pytest.raises(ParseError, match="damaged"):
        parse_file("junk.xls", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600)
    with pytest.raises(ParseError, match="binary"):
        parse_file("image.csv", b"\x89PNG\r\n\x1a\n" + b"\x00" * 100)


def test_an_xlsx_that_unpacks_too_far_is_refused() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for info in zipfile.ZipFile(io.BytesIO(xlsx_bytes({"s": [["a"]]}))).infolist():
            zf.writestr(info.filename, b"x")
        zf.writestr("xl/media/padding.bin", b"\x00" * (3 << 20))
    with pytest.raises(ParseError, match="zip bomb"):
        parse_file("bomb.xlsx", out.getvalue(), limits=GuardLimits(max_unpacked_bytes=2 << 20))


def _xls(sheets: dict[str, list[list[object]]], merges: dict[str, list[tuple]]) -> bytes:
    """A real BIFF8 workbook (.xls), written by xlwt; ``merges``: (r1, r2, c1, c2), 0-based."""
    import datetime

    import xlwt

    book = xlwt.Workbook(encoding="utf-8")
    dated = xlwt.easyxf(num_format_str="YYYY-MM-DD")
    for name, rows in sheets.items():
        sheet = book.add_sheet(name)
        merged = {(r1, c1): (r2, c2) for r1, r2, c1, c2 in merges.get(name, [])}
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                if value is None:
                    continue
                style = dated if isinstance(value, datetime.date) else xlwt.Style.default_style
                if (r, c) in merged:
                    r2, c2 = merged[(r, c)]
                    sheet.write_merge(r, r2, c, c2, value, style)
                else:
                    sheet.write(r, c, value, style)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def test_a_real_xls_reads_every_sheet_merged_cells_numbers_and_dates() -> None:
    import datetime

    data = _xls(
        {
            "요약": [["항목", "값"], ["부서", "총무팀"]],
            "셔틀": [["노선", "출발"], ["강남 순환", "08:15"], [None, "09:15"], ["판교", 3]],
            "일정": [["행사", "날짜"], ["창립 기념일", datetime.date(2026, 3, 16)]],
        },
        merges={"셔틀": [(1, 2, 0, 0)]},
    )
    assert data.startswith(b"\xd0\xcf\x11\xe0")  # an OLE compound file, as Excel writes
    sheets = texts(parse_file("office.xls", data))
    assert list(sheets) == ["요약", "셔틀", "일정"]
    assert sheets["요약"].splitlines()[-1] == "항목: 부서, 값: 총무팀"
    assert sheets["셔틀"].splitlines()[-3:] == [
        "노선: 강남 순환, 출발: 08:15",
        "노선: 강남 순환, 출발: 09:15",  # merged down
        "노선: 판교, 출발: 3",  # a number as written, not 3.0
    ]
    assert "창립 기념일" in sheets["일정"] and "2026-03-16" in sheets["일정"]
