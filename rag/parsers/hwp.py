"""HWP (Hancom Office 5.x binary, an OLE compound file) to sections with hwp-hwpx-parser.

The ``FileHeader`` stream's flags are read first: a password-encrypted, DRM-protected or
distribution-only document is refused as a protected document. The body sections are then
checked for a decompression bomb (zlib streams are inflated with a cap before the library
inflates them without one). Tables come out as ``Header: value`` lines, one per row; HWP keeps
no heading styles this reader can see, so each body section of the file is one section.
"""

from __future__ import annotations

import struct
import zlib

import olefile
from hwp_hwpx_parser.hwp5 import HWP5Reader
from hwp_hwpx_parser.models import ExtractOptions, ImageMarkerStyle, TableData

from rag.parsers.errors import ParseError
from rag.parsers.guard import DEFAULT_LIMITS
from rag.parsers.rows import table_lines
from rag.types import ParsedDocument, Section

MIME = "application/x-hwp"

_SIGNATURE = b"HWP Document File"
_COMPRESSED = 1 << 0
# FileHeader property bits (HWP 5.0 spec, "파일 인식 정보"): what makes a document unreadable
_PROTECTED = {
    1 << 1: "password-encrypted",
    1 << 2: "a distribution-only document (배포용 문서)",
    1 << 4: "DRM-protected",
    1 << 8: "encrypted with a certificate",
    1 << 10: "DRM-protected with a certificate",
}


class _KeyedTable(TableData):
    """A table that renders as header-keyed rows wherever the reader formats it."""

    def format(self, style: object, delimiter: str = ",") -> str:  # noqa: ARG002
        return "\n".join(table_lines(self.rows))


class _Reader(HWP5Reader):
    """hwp-hwpx-parser's reader over an already opened OLE file, tables as keyed rows."""

    def __init__(self, ole: olefile.OleFileIO) -> None:
        super().__init__("<memory>")
        self._ole = ole

    def _build_table_data(self, *args, **kwargs) -> TableData:  # noqa: ANN002, ANN003
        return _KeyedTable(rows=super()._build_table_data(*args, **kwargs).rows)


def _open(data: bytes) -> olefile.OleFileIO:
    try:
        ole = olefile.OleFileIO(data)
    except Exception as exc:
        raise ParseError(f"the HWP is damaged or not an HWP: {exc}") from exc
    if not ole.exists("FileHeader"):
        ole.close()
        raise ParseError("the file is not an HWP document (no HWP file header)")
    return ole


def _flags(ole: olefile.OleFileIO) -> int:
    header = ole.openstream("FileHeader").read(40)
    if len(header) < 40 or not header.startswith(_SIGNATURE):
        raise ParseError("the file is not an HWP 5 document (unknown file header)")
    flags = struct.unpack_from("<I", header, 36)[0]
    for bit, what in _PROTECTED.items():
        if flags & bit:
            raise ParseError(
                f"the HWP is a protected document ({what}); save it without protection to index it"
            )
    return flags


def _sections(ole: olefile.OleFileIO) -> list[str]:
    names = ["/".join(e) for e in ole.listdir() if len(e) == 2 and e[0] == "BodyText"]
    return sorted((n for n in names if n[9:16] == "Section"), key=lambda n: int(n[16:] or 0))


def _check_inflated_size(ole: olefile.OleFileIO, sections: list[str], limit: int) -> None:
    total = 0
    for name in sections:
        inflate = zlib.decompressobj(-15)
        left = ole.openstream(name).read()
        while left and total <= limit:
            try:
                total += len(inflate.decompress(left, limit + 1 - total))
            except zlib.error as exc:
                raise ParseError(f"the HWP is damaged ({name}: {exc})") from exc
            left = inflate.unconsumed_tail
        if total > limit:
            raise ParseError(
                f"the HWP expands to more than {limit // (1 << 20)} MB when unpacked; "
                "refusing (decompression bomb?)"
            )


def read_hwp(data: bytes, limit: int = DEFAULT_LIMITS.max_unpacked_bytes) -> list[str]:
    """The text of each body section (for the parser and the benchmark)."""
    ole = _open(data)
    try:
        flags = _flags(ole)
        names = _sections(ole)
        if not names:
            raise ParseError("the HWP is damaged: it has no body sections")
        if flags & _COMPRESSED:
            _check_inflated_size(ole, names, limit)
        reader = _Reader(ole)
        options = ExtractOptions(image_marker=ImageMarkerStyle.NONE)
        reader._reset_counters()
        return [
            reader._extract_section_text(reader._read_section(i), options)
            for i in range(len(names))
        ]
    except ParseError:
        raise
    except Exception as exc:  # the library raises many kinds on a damaged record stream
        raise ParseError(f"the HWP is damaged: {exc}") from exc
    finally:
        ole.close()


def parse_hwp(data: bytes, fallback_title: str) -> ParsedDocument:
    """One section per HWP body section; tables as header-keyed rows."""
    texts = read_hwp(data)
    sections = tuple(Section(heading="", text=t.strip()) for t in texts if t.strip())
    return ParsedDocument(title=fallback_title, sections=sections, mime=MIME)
