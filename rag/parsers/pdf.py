"""PDF to sections with pypdf: the text layer of each page is one section, page kept."""

from __future__ import annotations

import io

from pypdf import PdfReader
from pypdf.errors import DependencyError, FileNotDecryptedError

from rag.parsers.errors import ParseError
from rag.types import ParsedDocument, Section

MIME = "application/pdf"

_ENCRYPTED = "the PDF is encrypted with a password; remove the password and upload it again"


def looks_like_heading(line: str) -> bool:
    """A short line that does not read like a sentence: a page's title, not its prose."""
    s = line.strip()
    return (
        2 <= len(s) <= 80
        and len(s.split()) <= 12
        and any(c.isalpha() for c in s)
        and s[-1] not in ".,;:!?"
    )


def page_section(text: str, page: int) -> Section | None:
    """One page's text as a section; its first line is the heading when it looks like one."""
    body = "\n".join(ln.rstrip() for ln in text.splitlines()).strip()
    if not body:
        return None
    first, _, rest = body.partition("\n")
    if rest.strip() and looks_like_heading(first):
        return Section(heading=first.strip(), text=rest.strip(), page=page)
    return Section(heading="", text=body, page=page)


def _open(data: bytes) -> PdfReader:
    try:
        reader = PdfReader(io.BytesIO(data))
    except Exception as exc:  # pypdf raises many kinds on malformed input
        raise ParseError(f"the PDF is damaged or not a PDF: {exc}") from exc
    if reader.is_encrypted:
        try:
            opened = reader.decrypt("")  # many "protected" PDFs only restrict printing
        except DependencyError as exc:
            raise ParseError(f"the PDF is encrypted and cannot be opened here: {exc}") from exc
        except Exception as exc:
            raise ParseError(f"{_ENCRYPTED} ({exc})") from exc
        if not opened:
            raise ParseError(_ENCRYPTED)
    return reader


def _title(reader: PdfReader) -> str:
    try:
        meta = reader.metadata
        title = meta.title if meta is not None else None
    except Exception:  # a broken info dictionary only costs us the title
        return ""
    return title.strip() if isinstance(title, str) else ""


def parse_pdf(data: bytes, fallback_title: str) -> ParsedDocument:
    """Extract each page's text layer; raise ``ParseError`` when none can be had."""
    reader = _open(data)
    sections: list[Section] = []
    try:
        pages = list(reader.pages)
        for number, page in enumerate(pages, start=1):
            section = page_section(page.extract_text() or "", number)
            if section is not None:
                sections.append(section)
    except FileNotDecryptedError as exc:
        raise ParseError(_ENCRYPTED) from exc
    except Exception as exc:
        raise ParseError(f"the PDF is damaged or not a PDF: {exc}") from exc
    if not pages:
        raise ParseError("the PDF has no pages")
    if not sections:
        raise ParseError(
            "the PDF has no text layer (a scanned image?); run OCR on it and upload it again"
        )
    return ParsedDocument(
        title=_title(reader) or fallback_title, sections=tuple(sections), mime=MIME
    )
