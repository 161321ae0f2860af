"""Markdown to sections: the first ``#`` heading is the title, the others start sections."""

from __future__ import annotations

import re

from rag.types import ParsedDocument, Section

MIME = "text/markdown"

_MD_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def parse_markdown(text: str, fallback_title: str) -> ParsedDocument:
    """Split Markdown at ATX headings; the first level-1 heading becomes the title."""
    title = ""
    sections: list[Section] = []
    heading, buf = "", []

    def close() -> None:
        body = "\n".join(buf).strip()
        if body:
            sections.append(Section(heading=heading, text=body))

    for line in text.splitlines():
        m = _MD_HEADING.match(line)
        if m:
            level, name = len(m.group(1)), m.group(2).strip()
            if level == 1 and not title:
                close()
                title, heading, buf = name, "", []
                continue
            close()
            heading, buf = name, []
        else:
            buf.append(line)
    close()
    return ParsedDocument(title=title or fallback_title, sections=tuple(sections), mime=MIME)
