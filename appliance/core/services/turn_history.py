"""A stored conversation as the turns it sent: what ``TurnPrompts.prepare``, continuation and
regenerate rebuild each prompt from (``rag.layout.Conversation.resume``).

Each question's message keeps its last user message as sent (``prompt_text``) and how the turn
was laid out (``prompt_parts``: the layout, the hint and question, a re-lay's document block and
the chunks it rendered, ``rag.layout.SentTurn``). Turns stored before layouts have no parts:
they were appended, and each rendered exactly the chunks its answer numbered first
(``rag.prompt_keys.rendered_numbers``); parts that cannot be read are taken the same way, so a
damaged row never stops its conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from appliance.core.db.models import Conversation, Message
from rag.layout import APPEND, RELAY, SentTurn
from rag.prompt import Citation, render_user_turn
from rag.prompt_keys import rendered_numbers

_CITATION_FIELDS = {f.name for f in fields(Citation)}
_KINDS = (APPEND, RELAY)


@dataclass(frozen=True)
class StoredTurn:
    """One stored turn: how it was sent, its answer, and the answer's citations (as stored)."""

    sent: SentTurn
    answer: str
    citations: list[dict]
    question: str = ""  # the question as the user typed it (what a follow-up may carry)


def citation_of(stored: dict) -> Citation:
    """A stored citation (``dataclasses.asdict`` of a ``Citation``) as a ``Citation``."""
    return Citation(**{k: v for k, v in stored.items() if k in _CITATION_FIELDS})


def parts_of(sent: SentTurn) -> dict[str, Any]:
    """What ``prompt_parts`` stores of a turn (its last user message is ``prompt_text``)."""
    return {
        "layout": sent.kind,
        "short": sent.short,
        "docs": sent.docs,
        "chunks": [[cid, number] for cid, number in sent.chunks],
    }


def stored_turns(conv: Conversation) -> list[StoredTurn]:
    """The conversation's turns, oldest first: each question with the answer after it."""
    pairs = [
        (user, answer)
        for user, answer in zip(conv.messages[::2], conv.messages[1::2], strict=False)
        if user.role == "user" and answer.role == "assistant"
    ]
    cited = [answer.citations or [] for _user, answer in pairs]
    legacy = rendered_numbers(cited)
    return [
        StoredTurn(_sent(user, citations, numbers), answer.content, citations, user.content)
        for (user, answer), citations, numbers in zip(pairs, cited, legacy, strict=True)
    ]


def sent_pairs(turns: Sequence[StoredTurn]) -> list[tuple[SentTurn, str]]:
    """(how it was sent, its answer) per turn: what ``Conversation.resume`` replays."""
    return [(t.sent, t.answer) for t in turns]


def _sent(user: Message, citations: list[dict], legacy: dict[int, int]) -> SentTurn:
    """How ``user``'s turn was sent: from its parts, else as a turn stored before layouts."""
    text = user.prompt_text or user.content
    parts = user.prompt_parts
    if isinstance(parts, dict) and parts.get("layout") in _KINDS:
        try:
            chunks = tuple((int(cid), int(n)) for cid, n in parts.get("chunks") or ())
        except (TypeError, ValueError):
            pass  # not what this module writes (say, a hand-edited restore): read as below
        else:
            kind, short, docs = parts["layout"], parts.get("short"), parts.get("docs")
            return SentTurn(str(kind), text, str(short or ""), str(docs or ""), chunks)
    short = render_user_turn(user.content, [], [citation_of(c) for c in citations])
    return SentTurn(APPEND, text, short, "", tuple(legacy.items()))
