"""The cache shadow's keys for a conversation's prompt segments (pure).

The ordering's shadow (``rag.ordering.shadow``) follows segment keys, not tokens. A turn's user
message is keyed as the chunks it rendered (their ids, in prompt order) followed by one key for
the rest of the message (relevance hint and question); its answer has a key of its own, because
the engine caches the tokens it generated right after the prompt. A turn is recorded under
exactly these keys when it is sent, and the next turn's prefix is built from the same keys, so
the shadow walks the nodes it already holds instead of counting the same tokens twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rag.prompt import segment_key

USER_ROLE, ANSWER_ROLE = "user", "assistant"

Key = int | str  # a chunk id, or the key of a rendered segment


@dataclass(frozen=True)
class RenderedTurn:
    """One earlier turn as it sits in the prompt: the chunks its user message rendered (in
    prompt order), that message's text, and the answer."""

    chunk_ids: tuple[int, ...]
    user_turn: str
    answer: str


def tail_key(user_turn: str) -> str:
    """The key of a user message's part after its documents (keyed by the whole message, which
    is unique to it)."""
    return segment_key(USER_ROLE, user_turn)


def answer_key(answer: str) -> str:
    """The key of an answer."""
    return segment_key(ANSWER_ROLE, answer)


def is_tail_key(key: object) -> bool:
    """Whether ``key`` is a user message's (so the first one names its conversation)."""
    return isinstance(key, str) and key.startswith(f"{USER_ROLE}:")


def is_answer_key(key: object) -> bool:
    """Answers are cached as the engine generated them; their re-rendered text can tokenise
    differently, so a shortfall there is not evidence of an eviction."""
    return isinstance(key, str) and key.startswith(f"{ANSWER_ROLE}:")


def shadow_prefix(system_prompt: str, turns: Sequence[RenderedTurn]) -> tuple[Key, ...]:
    """Keys of everything before a new turn's documents: the system prompt, then per earlier
    turn its chunk ids, its user message's tail and its answer."""
    keys: list[Key] = [segment_key("system", system_prompt)]
    for turn in turns:
        keys += [*turn.chunk_ids, tail_key(turn.user_turn), answer_key(turn.answer)]
    return tuple(keys)


def rendered_numbers(cited_per_turn: Sequence[Sequence[dict]]) -> list[dict[int, int]]:
    """Per stored turn (its answer's citations, oldest turn first), the chunks its user message
    rendered, chunk id -> number, in prompt order. A turn renders exactly the chunks it numbered
    first: numbers are given in prompt order and kept for the rest of the conversation."""
    out: list[dict[int, int]] = []
    highest = 0
    for cited in cited_per_turn:
        new = sorted((c["number"], c["chunk_id"]) for c in cited if c["number"] > highest)
        out.append({cid: n for n, cid in new})
        highest = max([highest, *(n for n, _c in new)])
    return out
