"""HWPX (Hancom Office's open format, OWPML: a zip of XML) to sections.

Paragraphs come from ``Contents/section*.xml`` in order. A paragraph whose style is an outline
or heading style (``개요 1``/``Outline 1``/``Heading 1``, or a paragraph shape with an OUTLINE
heading) starts a section. Tables become one ``Header: value`` line per row, merged cells
spread over the rows and columns they cover. The content must already have passed
:func:`rag.parsers.guard.check_content` (type and zip-bomb limits).
"""

from __future__ import annotations

import io
import re
import zipfile
from xml.etree import ElementTree as ET

from rag.parsers.errors import ParseError
from rag.parsers.rows import table_lines
from rag.parsers.sections import SectionBuilder
from rag.types import ParsedDocument

MIME = "application/hwp+zip"

_SECTION_PART = re.compile(r"^Contents/section(\d+)\.xml$")
_HEADING_STYLE = re.compile(r"^(개요|outline|heading|제목)\s*\d*$", re.IGNORECASE)
_MAX_HEADING_CHARS = 120  # an "outline" paragraph longer than this is body text


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _heading_ids(header: ET.Element) -> tuple[set[str], set[str]]:
    """Style ids and paragraph-shape ids that mark a heading, from ``Contents/header.xml``."""
    styles, shapes = set(), set()
    for el in header.iter():
        name = _local(el.tag)
        if name == "style" and el.get("type", "PARA") == "PARA":
            label = el.get("engName") or ""
            if _HEADING_STYLE.match(el.get("name") or "") or _HEADING_STYLE.match(label):
                styles.add(el.get("id", ""))
        elif name == "paraPr":
            for child in el.iter():
                if _local(child.tag) == "heading" and child.get("type") == "OUTLINE":
                    shapes.add(el.get("id", ""))
                    break
    return styles, shapes


def _text(el: ET.Element) -> str:
    """A paragraph's own text (``hp:t`` runs, tabs and line breaks), without its tables."""
    out: list[str] = []

    def walk(node: ET.Element) -> None:
        for child in node:
            name = _local(child.tag)
            if name in ("tbl", "subList"):  # tables and nested text are read on their own
                continue
            if name == "t":
                out.append(child.text or "")
                for inner in child:  # <hp:tab/>, <hp:lineBreak/> inside the text
                    out.append(" " if _local(inner.tag) in ("tab", "lineBreak") else "")
                    out.append(inner.tail or "")
            else:
                walk(child)

    walk(el)
    return " ".join("".join(out).split())


def _cell_text(tc: ET.Element) -> str:
    return " ".join(_text(p) for p in tc.iter() if _local(p.tag) == "p" and _text(p))


def _table_grid(tbl: ET.Element) -> list[list[str]]:
    """The table as a full grid: a merged cell's text in every row and column it spans."""
    cells: list[tuple[int, int, int, int, str]] = []
    for r, tr in enumerate(c for c in tbl if _local(c.tag) == "tr"):
        for c, tc in enumerate(x for x in tr if _local(x.tag) == "tc"):
            addr = next((x for x in tc if _local(x.tag) == "cellAddr"), None)
            span = next((x for x in tc if _local(x.tag) == "cellSpan"), None)
            row = int(addr.get("rowAddr", r)) if addr is not None else r
            col = int(addr.get("colAddr", c)) if addr is not None else c
            rows = int(span.get("rowSpan", 1)) if span is not None else 1
            cols = int(span.get("colSpan", 1)) if span is not None else 1
            cells.append((row, col, max(rows, 1), max(cols, 1), _cell_text(tc)))
    if not cells:
        return []
    height = max(r + h for r, _, h, _, _ in cells)
    width = max(c + w for _, c, _, w, _ in cells)
    if height * width > 1_000_000:
        raise ParseError("the HWPX has a table too large to read")
    grid = [[""] * width for _ in range(height)]
    for r, c, h, w, text in cells:
        for rr in range(r, r + h):
            for cc in range(c, c + w):
                grid[rr][cc] = text
    return grid


def _walk(el: ET.Element, heads: tuple[set[str], set[str]], out: SectionBuilder) -> int:
    """Paragraphs and tables under ``el`` in document order; the count of paragraphs."""
    count = 0
    for child in el:
        name = _local(child.tag)
        if name == "tbl":
            out.add("", *table_lines(_table_grid(child)), "")
        elif name == "p":
            count += 1
            text = _text(child)
            styles, shapes = heads
            is_head = child.get("styleIDRef") in styles or child.get("paraPrIDRef") in shapes
            if text and is_head and len(text) <= _MAX_HEADING_CHARS:
                out.start(text)
            elif text:
                out.add(text)
            count += _walk(child, heads, out)  # tables sit inside a paragraph's run
        elif name not in ("subList",):
            count += _walk(child, heads, out)
    return count


def _parse_xml(zf: zipfile.ZipFile, part: str) -> ET.Element:
    try:
        return ET.fromstring(zf.read(part))
    except ET.ParseError as exc:
        raise ParseError(f"the HWPX is damaged ({part}: {exc})") from exc


def _title(zf: zipfile.ZipFile) -> str:
    if "Contents/content.hpf" not in zf.namelist():
        return ""
    root = _parse_xml(zf, "Contents/content.hpf")
    title = next((el.text for el in root.iter() if _local(el.tag) == "title"), "")
    return (title or "").strip()


def read_hwpx(data: bytes) -> tuple[str, SectionBuilder, int]:
    """Title, sections and paragraph count of an HWPX (for the parser and the benchmark)."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ParseError(f"the HWPX is damaged or not an HWPX: {exc}") from exc
    with zf:
        names = zf.namelist()
        manifest = zf.read("META-INF/manifest.xml") if "META-INF/manifest.xml" in names else b""
        if b"encryption-data" in manifest.lower():
            raise ParseError(
                "the HWPX is a protected document (password-encrypted); "
                "save it without a password to index it"
            )
        parts = sorted(
            (int(m.group(1)), n) for n in names if (m := _SECTION_PART.match(n)) is not None
        )
        if not parts:
            raise ParseError("the HWPX is damaged: it has no body sections")
        heads = (set(), set())
        if "Contents/header.xml" in names:
            heads = _heading_ids(_parse_xml(zf, "Contents/header.xml"))
        out = SectionBuilder()
        paragraphs = 0
        for _, part in parts:
            paragraphs += _walk(_parse_xml(zf, part), heads, out)
        return _title(zf), out, paragraphs


def parse_hwpx(data: bytes, fallback_title: str) -> ParsedDocument:
    """Sections by outline/heading paragraphs; tables as header-keyed rows."""
    try:
        title, sections, _ = read_hwpx(data)
    except (ParseError, zipfile.BadZipFile) as exc:
        raise ParseError(str(exc)) from exc
    except (KeyError, ValueError, RuntimeError) as exc:  # RuntimeError: an encrypted member
        raise ParseError(f"the HWPX is damaged: {exc}") from exc
    return ParsedDocument(title=title or fallback_title, sections=sections.finish(), mime=MIME)
