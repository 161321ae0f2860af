"""Safety checks before a parser sees the bytes: real type by content, and zip-bomb limits.

A file is refused with a clear ``ParseError`` when its content does not match its suffix
(a PDF named ``.docx``, a program named ``.pdf``), and a DOCX/PPTX is refused when its zip
central directory says it would unpack to more than the limits allow. The declared sizes are
trustworthy for this: :mod:`zipfile`, which python-docx and python-pptx read through, never
returns more than a member's declared size.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass

from rag.parsers.errors import ParseError

_MB = 1024 * 1024

PDF, DOCX, PPTX, XLSX, ZIP = "PDF", "DOCX", "PPTX", "XLSX", "a ZIP archive"
# the suffixes .png/.jpg/.jpeg/.tif/.tiff expect IMAGE: any of these (a renamed photo is fine)
IMAGE = "image"
IMAGE_KINDS = frozenset({"a PNG image", "a JPEG image", "a TIFF image"})

# Magic numbers of 4+ bytes: specific enough to call out even in a file named .txt.
_STRONG_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"PK\x03\x04", ZIP),
    (b"PK\x05\x06", ZIP),  # an empty zip
    (b"\x7fELF", "a Linux program"),
    (b"\x89PNG", "a PNG image"),
    (b"GIF8", "a GIF image"),
    (b"II*\x00", "a TIFF image"),
    (b"MM\x00*", "a TIFF image"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "a legacy Office or HWP file (.doc/.xls/.hwp)"),
    (b"Rar!", "a RAR archive"),
    (b"7z\xbc\xaf", "a 7-Zip archive"),
)
_WEAK_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"MZ", "a Windows program"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"\x1f\x8b", "a gzip archive"),
)
# Main-part content types in [Content_Types].xml, for packages with unusual part names.
_OOXML_TYPES: tuple[tuple[bytes, str], ...] = (
    (b"wordprocessingml.document.main+xml", DOCX),
    (b"wordprocessingml.template.main+xml", DOCX),
    (b"ms-word.document.macroEnabled.main+xml", DOCX),
    (b"presentationml.presentation.main+xml", PPTX),
    (b"presentationml.slideshow.main+xml", PPTX),
    (b"ms-powerpoint.presentation.macroEnabled.main+xml", PPTX),
    (b"spreadsheetml.sheet.main+xml", XLSX),
)
_OOXML_PARTS = {"word/document.xml": DOCX, "ppt/presentation.xml": PPTX, "xl/workbook.xml": XLSX}
# Hancom Office and legacy Excel: .hwpx is a zip (OWPML, checked like OOXML); .hwp and .xls are
# OLE compound files, which the guard only recognises (their parsers check the streams)
HWPX, HWP, XLS = "HWPX", "HWP", "XLS"
_OLE_KIND = "a legacy Office or HWP file (.doc/.xls/.hwp)"
_OLE_EXPECTED = frozenset({HWP, XLS})
_OOXML_PARTS["Contents/header.xml"] = HWPX
_OOXML_TYPES += ((b"application/hwp+zip", HWPX),)
# an encrypted OOXML file is an OLE file holding these streams (names are UTF-16 in the directory)
_ENCRYPTED_OOXML = ("EncryptionInfo".encode("utf-16-le"), "EncryptedPackage".encode("utf-16-le"))


@dataclass(frozen=True)
class GuardLimits:
    """How far a zip-based document may expand before it is treated as a zip bomb."""

    max_unpacked_bytes: int = 200 * _MB
    max_ratio: float = 100.0
    ratio_floor_bytes: int = _MB  # members smaller than this cannot bomb; ratio not checked
    max_members: int = 10_000


DEFAULT_LIMITS = GuardLimits()


def _mb(n: int) -> str:
    """Bytes as megabytes for a message: "0.4 MB", "312 MB"."""
    return f"{n / _MB:.1f} MB" if n < 10 * _MB else f"{n // _MB} MB"


def _magic_kind(data: bytes, strong_only: bool = False) -> str | None:
    if data.startswith(b"%PDF-") or (not strong_only and b"%PDF-" in data[:1024]):
        return PDF
    table = _STRONG_MAGIC if strong_only else _STRONG_MAGIC + _WEAK_MAGIC
    for magic, kind in table:
        if data.startswith(magic):
            return kind
    return None


def _open_zip(data: bytes, expected: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ParseError(f"the {expected} is damaged or not a {expected}: {exc}") from exc


def check_zip_limits(zf: zipfile.ZipFile, limits: GuardLimits = DEFAULT_LIMITS) -> None:
    """Refuse a zip whose central directory promises too much data or too high a ratio."""
    infos = zf.infolist()
    if len(infos) > limits.max_members:
        raise ParseError(
            f"the document has {len(infos)} parts (limit {limits.max_members}); "
            "refusing (zip bomb?)"
        )
    total = sum(i.file_size for i in infos)
    if total > limits.max_unpacked_bytes:
        raise ParseError(
            f"the document expands to {_mb(total)} when unpacked "
            f"(limit {_mb(limits.max_unpacked_bytes)}); refusing (zip bomb?)"
        )
    for info in infos:
        if info.file_size < limits.ratio_floor_bytes:
            continue
        ratio = info.file_size / max(info.compress_size, 1)
        if ratio > limits.max_ratio:
            raise ParseError(
                f"the document expands to {_mb(info.file_size)} when unpacked "
                f"({ratio:.0f}x compression in {info.filename}); refusing (zip bomb?)"
            )


def _ooxml_kind(zf: zipfile.ZipFile) -> str:
    names = set(zf.namelist())
    for part, kind in _OOXML_PARTS.items():
        if part in names:
            return kind
    if "[Content_Types].xml" in names:
        with zf.open("[Content_Types].xml") as f:
            types = f.read(_MB)
        for marker, kind in _OOXML_TYPES:
            if marker in types:
                return kind
    return ZIP


def check_content(expected: str, data: bytes, limits: GuardLimits = DEFAULT_LIMITS) -> None:
    """Check that ``data`` really is ``expected`` (PDF, DOCX, PPTX, image, HTML or "text").

    Raises ``ParseError`` for an empty file, for content of another type, and for a
    DOCX/PPTX that would unpack beyond ``limits``.
    """
    if not data.strip():
        raise ParseError("the file is empty")
    if expected in ("text", "HTML"):
        kind = _magic_kind(data, strong_only=True)
        if kind is not None:
            raise ParseError(f"the file looks binary, not {expected} (looks like {kind})")
        return
    kind = _magic_kind(data)
    if expected == PDF:
        if kind != PDF:
            raise ParseError(f"the file's content is not a PDF (looks like {kind or 'text'})")
        return
    if expected == IMAGE:
        if kind not in IMAGE_KINDS:
            raise ParseError(
                f"the file's content is not a PNG, JPEG or TIFF image (looks like {kind or 'text'})"
            )
        return
    if expected in _OLE_EXPECTED:
        if kind != _OLE_KIND:
            looks = kind or "text"
            raise ParseError(f"the file's content is not a {expected} (looks like {looks})")
        return
    if kind == _OLE_KIND and any(name in data for name in _ENCRYPTED_OOXML):
        raise ParseError(
            f"the {expected} is a protected document (password-encrypted); "
            "save it without a password to index it"
        )
    if kind != ZIP:
        raise ParseError(f"the file's content is not a {expected} (looks like {kind or 'text'})")
    with _open_zip(data, expected) as zf:
        check_zip_limits(zf, limits)
        actual = _ooxml_kind(zf)
    if actual != expected:
        raise ParseError(f"the file's content is not a {expected} (looks like {actual})")
