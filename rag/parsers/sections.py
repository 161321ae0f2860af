"""Collecting a document's lines into sections, shared by the text-flow parsers."""

from __future__ import annotations

from rag.types import Section


class SectionBuilder:
    """Lines go to the current section; ``start`` opens a new one. Sections whose body is
    blank are dropped."""

    def __init__(self) -> None:
        self._sections: list[Section] = []
        self._heading = ""
        self._lines: list[str] = []

    def start(self, heading: str) -> None:
        self._close()
        self._heading = heading

    def add(self, *lines: str) -> None:
        self._lines.extend(lines)

    def finish(self) -> tuple[Section, ...]:
        self._close()
        return tuple(self._sections)

    def _close(self) -> None:
        body = "\n".join(self._lines).strip()
        if body:
            self._sections.append(Section(heading=self._heading, text=body))
        self._lines = []
