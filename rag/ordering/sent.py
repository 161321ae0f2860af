"""What the cache shadow learns from one finished request (a typed message, no logic)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Sent:
    """One request as it reached the engine, and what the engine reported for it.

    ``prefix`` holds the keys of everything before this turn's documents (the system prompt,
    then each earlier turn's chunk ids, user-message key and answer key); ``chunk_ids`` the
    chunks rendered in this turn, in prompt order; ``tail`` the key of the rest of this turn's
    user message (None: unknown, so unique to this request) and ``answer`` the key of the
    answer the engine generated and cached after the prompt (None: not to be followed).
    ``weights`` holds the token counts the facade knows (chunks); the rest is estimated from
    ``prompt_tokens`` and ``completion_tokens``. ``worker`` names the engine worker that served
    the request, where a gateway says so (empty: unknown, or a single engine)."""

    prefix: tuple[Hashable, ...]
    chunk_ids: tuple[Hashable, ...]
    prompt_tokens: int
    cached_tokens: int
    page_tokens: int = 1
    tail: Hashable | None = None
    answer: Hashable | None = None
    completion_tokens: int = 0
    weights: Mapping[Hashable, int] = field(default_factory=dict)
    worker: str = ""
    # keys between this turn's documents and ``tail`` (a re-laid turn's history, which follows
    # its documents); empty for an appended turn
    after: tuple[Hashable, ...] = ()

    @property
    def path(self) -> tuple[Hashable, ...]:
        """The request's keys in prompt order (``tail`` last; None when unknown)."""
        return (*self.prefix, *self.chunk_ids, *self.after, self.tail)
