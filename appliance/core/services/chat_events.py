"""The events of a chat turn's stream, in order: ``RetrievalEvent`` (the sources and the
evidence card, before any generated text), ``DeltaEvent``s, then ``DoneEvent`` (stored) or
``ErrorEvent`` (nothing stored)."""

from __future__ import annotations

from dataclasses import dataclass

from appliance.core.errors import ErrorKind
from appliance.core.services.grounding import CardSentence
from engine.base import GenerationStats
from rag.prompt import Citation
from rag.verify import AnswerCheck


@dataclass(frozen=True)
class RetrievalEvent:
    """The turn's sources, before any generated text: its citations and, unless the answer
    mode is ``generative``, the evidence card (verbatim sentences with their numbers)."""

    citations: list[Citation]
    retrieval_ms: float
    evidence: tuple[CardSentence, ...] = ()
    mode: str = "generative"


@dataclass(frozen=True)
class DeltaEvent:
    text: str


@dataclass(frozen=True)
class DoneEvent:
    conversation_id: int
    message_id: int
    answer: str
    stats: GenerationStats
    retrieval_ms: float
    # every answer sentence against the sources (None only where nothing was checked)
    check: AnswerCheck | None = None
    # the answer began to repeat itself and was stopped there (``rag.repeats``)
    repeated: bool = False


@dataclass(frozen=True)
class ErrorEvent:
    kind: ErrorKind
    message: str


ChatEvent = RetrievalEvent | DeltaEvent | DoneEvent | ErrorEvent
