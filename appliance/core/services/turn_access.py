"""What a reader may still be given of a stored conversation, now (pure).

A chunk's collection is checked when it is retrieved, but a conversation stores the documents
its turns were given (``prompt_parts``, replayed by every later prompt) and the citations and
evidence card of each answer (shown with the history). Once a reader may no longer read a
chunk (its collection revoked, or its document moved to a collection they do not have):

- the turns that rendered or cited it are **withheld**: they stay out of every later prompt
  (follow-up, regenerate, continue), documents, question and answer, while their chunks keep
  their numbers (``rag.layout.Conversation.resume``'s ``left_out``); an answer cut at the
  length limit whose own turn is withheld is not continued;
- its citations in the stored history keep their number, title and place but lose their text
  (``withheld``: true), its sentences leave the evidence card, and an ``extractive`` answer
  (the card itself) is made again from the sentences left (``shown_answer``). Other answers
  are shown as they were given: they are the reader's own conversation.

Access given back brings it all back: nothing stored is changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from appliance.core.services.grounding import card_answer
from appliance.core.services.turn_history import StoredTurn

# may the reader read this chunk now (by id): ``KnowledgeBase.readable``
Readable = Callable[[int], bool]


def _ids(citations: Iterable[Mapping[str, Any]]) -> set[int]:
    return {int(c["chunk_id"]) for c in citations if c.get("chunk_id") is not None}


def withheld(turns: Sequence[StoredTurn], readable: Readable) -> frozenset[int]:
    """The indexes of ``turns`` that rendered or cited a chunk the reader may not read."""
    return frozenset(
        at
        for at, turn in enumerate(turns)
        if not all(map(readable, {cid for cid, _n in turn.sent.chunks} | _ids(turn.citations)))
    )


def redacted_citations(citations: Sequence[Mapping[str, Any]], readable: Readable) -> list[dict]:
    """Stored citations as the reader may see them: an unreadable chunk's without its text."""
    return [
        dict(c) if readable(int(c["chunk_id"])) else {**c, "text": "", "withheld": True}
        for c in citations
    ]


def redacted_card(card: Sequence[Mapping[str, Any]], readable: Readable) -> list[dict]:
    """A stored evidence card without the sentences of chunks the reader may not read."""
    return [dict(s) for s in card if readable(int(s["chunk_id"]))]


@dataclass(frozen=True)
class ShownAnswer:
    """A stored answer as its reader may see it now: its text, citations and evidence card,
    and whether its stored verdicts still apply (not to an ``extractive`` answer made again)."""

    content: str
    citations: list[dict]
    evidence: list[dict]
    verdicts_apply: bool = True


def shown_answer(
    question: str,
    answer: str,
    mode: str | None,
    citations: Sequence[Mapping[str, Any]],
    card: Sequence[Mapping[str, Any]],
    readable: Readable,
) -> ShownAnswer:
    """An answer with its citations and card redacted; an ``extractive`` answer (the card,
    verbatim: ``grounding.extractive_answer``) that lost sentences is made again from those
    left ("no sentence answers this" when none are)."""
    kept = redacted_card(card, readable)
    cited = redacted_citations(citations, readable)
    if len(kept) == len(card) or mode != "extractive":
        return ShownAnswer(answer, cited, kept)
    remade = card_answer([(s["text"], s["number"]) for s in kept], question)
    return ShownAnswer(remade, cited, kept, False)
