"""Plain text to sections: an optional title line, then ALL-CAPS lines as headings."""

from __future__ import annotations

from rag.parsers.sections import SectionBuilder
from rag.types import ParsedDocument

MIME = "text/plain"


def _is_caps_heading(line: str) -> bool:
    s = line.strip()
    letters = [c for c in s if c.isalpha()]
    return (
        3 <= len(s) <= 80
        and len(letters) >= 3
        and s.upper() == s
        and any(c.isupper() for c in letters)
    )


def parse_text(text: str, fallback_title: str) -> ParsedDocument:
    """A first line followed by a blank line is the title; ALL-CAPS lines start sections."""
    lines = text.splitlines()
    title = fallback_title
    if len(lines) > 1 and lines[0].strip() and not lines[1].strip():
        title, lines = lines[0].strip(), lines[2:]
    sections = SectionBuilder()
    for line in lines:
        if _is_caps_heading(line):
            sections.start(line.strip().title())
        else:
            sections.add(line)
    return ParsedDocument(title=title, sections=sections.finish(), mime=MIME)
