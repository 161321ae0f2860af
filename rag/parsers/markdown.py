"""Markdown to sections: the first ``#`` heading is the title, the others start sections."""

from __future__ import annotations

import re

from rag.parsers.sections import SectionBuilder
from rag.types import ParsedDocument

MIME = "text/markdown"

_MD_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def parse_markdown(text: str, fallback_title: str) -> ParsedDocument:
    """Split Markdown at ATX headings; the first level-1 heading becomes the title."""
    title = ""
    sections = SectionBuilder()
    for line in text.splitlines():
        m = _MD_HEADING.match(line)
        if not m:
            sections.add(line)
            continue
        level, name = len(m.group(1)), m.group(2).strip()
        if level == 1 and not title:
            title = name
            sections.start("")
        else:
            sections.start(name)
    return ParsedDocument(title=title or fallback_title, sections=sections.finish(), mime=MIME)
