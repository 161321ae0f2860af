"""Small typed records passed between the RAG stages."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Section:
    heading: str
    text: str
    page: int | None = None
    ocr_confidence: float | None = None  # 0..1 when the text was read by OCR, else None


@dataclass(frozen=True)
class ParsedDocument:
    title: str
    sections: tuple[Section, ...]
    mime: str
    # what the admin should know of a file that was read only in part (e.g. an OCR page
    # skipped for taking too long)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ChunkDraft:
    """A chunk before it has a database id."""

    ordinal: int
    section: str
    page: int | None
    text: str
    token_count: int
    ocr_confidence: float | None = None  # its section's, when read by OCR


@dataclass(frozen=True)
class RetrievedChunk:
    chunk_id: int
    document_id: int
    title: str
    section: str
    page: int | None
    text: str
    source: str
    score: float
    token_count: int = 0  # tokens of ``text`` (0: unknown); the ordering weighs cached paths
    ocr_confidence: float | None = None  # 0..1 when the chunk's text was read by OCR
    # read on into its neighbours: the parts of its text (``rag.neighbours.Joined.parts``),
    # so that its evidence pieces need no second lookup; () when shown as stored
    parts: tuple[tuple[int, int, int], ...] = ()
