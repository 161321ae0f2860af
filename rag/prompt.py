"""Prefix-stable prompt assembly (pure).

Layout of a conversation's messages: system prompt, then per turn a user message holding the
documents new to this conversation and the question, then the assistant's answer. Earlier turns
are replayed byte-for-byte from what was stored, so each turn's prompt extends the previous
turn's prompt plus its answer, and the engine's prefix cache covers all of it. Nothing
request-specific (date, user name, scores) is rendered before the documents.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from rag.language import reply_instruction, script_language
from rag.types import RetrievedChunk


@dataclass(frozen=True)
class Citation:
    number: int
    chunk_id: int
    document_id: int
    title: str
    section: str
    page: int | None
    source: str
    text: str
    # a cache rider: a lower-ranked chunk sent along because the engine had it cached (cited
    # like the others, left out of the relevance hint)
    rider: bool = False
    ocr_confidence: float | None = None  # 0..1 when the chunk was read by OCR (source view)


def chunk_header(title: str, section: str, page: int | None) -> str:
    """The fixed header of a chunk, rendered identically every time."""
    header = title if not section else f"{title} > {section}"
    return f"{header} (p. {page})" if page is not None else header


def render_chunk(number: int, chunk: RetrievedChunk) -> str:
    return (
        f"[{number}] {chunk_header(chunk.title, chunk.section, chunk.page)}\n{chunk.text.strip()}"
    )


def segment_key(role: str, text: str) -> str:
    """A stable key for one rendered message (the ordering's cache shadow follows these)."""
    return f"{role}:{hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]}"


def number_chunks(
    ordered: Sequence[RetrievedChunk],
    known: dict[int, int],
    relevance: Sequence[RetrievedChunk] | None = None,
    riders: Sequence[RetrievedChunk] = (),
    first_number: int = 1,
) -> tuple[list[tuple[int, RetrievedChunk]], list[Citation]]:
    """Give each chunk its number in the conversation.

    ``ordered`` is the chunks in prompt order; ``known`` maps chunk ids already shown in this
    conversation to their numbers. ``relevance`` is every retrieved chunk, most relevant first
    (default: ``ordered``); ``riders`` are the chunks of ``ordered`` sent only as cache riders,
    best ranked first. Returns the chunks new to the conversation with their numbers, in prompt
    order (to render in this turn), and a citation for every retrieved chunk, in relevance
    order, then one per rider. New numbers start above ``known``, and at ``first_number`` at
    least (a conversation whose oldest turns left the prompt never reuses their numbers).
    """
    next_number = max(max(known.values(), default=0) + 1, first_number)
    new: list[tuple[int, RetrievedChunk]] = []
    numbers = dict(known)
    for chunk in ordered:
        if chunk.chunk_id not in numbers:
            numbers[chunk.chunk_id] = next_number
            next_number += 1
            new.append((next_number - 1, chunk))
    citations: list[Citation] = []
    cited: set[int] = set()
    listed = [(c, False) for c in (relevance if relevance is not None else ordered)]
    for chunk, rider in [*listed, *((c, True) for c in riders)]:
        number = numbers.get(chunk.chunk_id)
        if number is None or chunk.chunk_id in cited:  # not rendered, or cited already
            continue
        cited.add(chunk.chunk_id)
        citations.append(
            Citation(
                number=number,
                chunk_id=chunk.chunk_id,
                document_id=chunk.document_id,
                title=chunk.title,
                section=chunk.section,
                page=chunk.page,
                source=chunk.source,
                text=chunk.text,
                rider=rider,
                ocr_confidence=chunk.ocr_confidence,
            )
        )
    return new, citations


def render_user_turn(
    question: str, new_chunks: Sequence[tuple[int, RetrievedChunk]], citations: Sequence[Citation]
) -> str:
    """The user message of one turn: new documents, a relevance hint (the retrieved chunks, most
    relevant first; cache riders are not listed), the language to answer in when the question
    is not English (``rag.language``), then the question."""
    parts: list[str] = []
    if new_chunks:
        parts.append("Documents:\n\n" + "\n\n".join(render_chunk(n, c) for n, c in new_chunks))
    hint = [c for c in citations if not c.rider]
    if hint:
        parts.append("Most relevant documents: " + ", ".join(f"[{c.number}]" for c in hint))
    # the answer's language follows the question's (an English question adds nothing)
    instruction = reply_instruction(script_language(question))
    if instruction:
        parts.append(instruction)
    parts.append(f"Question: {question.strip()}")
    return "\n\n".join(parts)


def build_messages(
    system_prompt: str,
    history: Sequence[tuple[str, str]],
    user_turn: str,
) -> tuple[tuple[str, str], ...]:
    """system | earlier turns (verbatim) | this turn."""
    return (("system", system_prompt), *history, ("user", user_turn))
