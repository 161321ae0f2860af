"""A page's text (from a PDF's text layer or from OCR) as a section, its heading guessed."""

from __future__ import annotations

from rag.types import Section


def looks_like_heading(line: str) -> bool:
    """A short line that does not read like a sentence: a page's title, not its prose."""
    s = line.strip()
    return (
        2 <= len(s) <= 80
        and len(s.split()) <= 12
        and any(c.isalpha() for c in s)
        and s[-1] not in ".,;:!?"
    )


def page_section(text: str, page: int | None) -> Section | None:
    """One page's text as a section; its first line is the heading when it looks like one."""
    body = "\n".join(ln.rstrip() for ln in text.splitlines()).strip()
    if not body:
        return None
    first, _, rest = body.partition("\n")
    if rest.strip() and looks_like_heading(first):
        return Section(heading=first.strip(), text=rest.strip(), page=page)
    return Section(heading="", text=body, page=page)
