"""The ordering facade the chat service talks to.

``order()`` lays out one request's new chunks with a named strategy; ``observe()`` tells the
facade what was actually sent and what the engine reported as cached, so strategies that model
the engine's prefix cache can follow it. ``prefix`` is a sequence of stable keys for everything
rendered before this turn's documents (the system prompt, then each earlier message).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from rag.types import RetrievedChunk

Strategy = Callable[[Sequence[RetrievedChunk], Sequence[str]], list[RetrievedChunk]]


class OrderingError(ValueError):
    """An unknown or unavailable strategy."""


def relevance_order(
    chunks: Sequence[RetrievedChunk], prefix: Sequence[str]
) -> list[RetrievedChunk]:
    """The retriever's order, most relevant first (the baseline)."""
    return list(chunks)


def doc_id_order(chunks: Sequence[RetrievedChunk], prefix: Sequence[str]) -> list[RetrievedChunk]:
    """Source order: by document, then chunk id (a stable order that ignores relevance)."""
    return sorted(chunks, key=lambda c: (c.document_id, c.chunk_id))


class ContextOrdering:
    def __init__(self, strategies: Mapping[str, Strategy]) -> None:
        self._strategies = dict(strategies)

    def names(self) -> list[str]:
        """The strategies available in this process."""
        return list(self._strategies)

    def order(
        self, strategy: str, chunks: Sequence[RetrievedChunk], prefix: Sequence[str]
    ) -> list[RetrievedChunk]:
        try:
            fn = self._strategies[strategy]
        except KeyError:
            raise OrderingError(
                f"unknown ordering strategy {strategy!r}; available: {', '.join(self.names())}"
            ) from None
        return fn(chunks, prefix)

    def observe(
        self,
        prefix: Sequence[str],
        chunk_ids: Sequence[int],
        prompt_tokens: int,
        cached_tokens: int,
    ) -> None:
        """What one finished request sent (chunk ids in prompt order) and what was cached."""


def default_ordering() -> ContextOrdering:
    return ContextOrdering({"relevance": relevance_order, "doc_id": doc_id_order})
