"""The ordering facade the chat service talks to.

``order()`` lays out one request's new chunks with a named strategy; ``observe()`` tells the
facade what was actually sent and what the engine reported as cached, so strategies that model
the engine's prefix cache can follow it. ``prefix`` is a sequence of stable keys for everything
rendered before this turn's documents (the system prompt, then each earlier message).

A request may also offer ``candidates``: lower-ranked retrieval results that a strategy may add
as cache riders (chunks whose KV the engine already holds, so they cost no prefill). Only
strategies marked ``takes_riders`` see them; the others order the required chunks as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Protocol

from rag.ordering import contextpilot_adapter
from rag.ordering.prefix import PrefixOrdering, chunk_weight
from rag.ordering.routed import RoutedPrefixOrdering
from rag.ordering.sent import Sent
from rag.types import RetrievedChunk

Strategy = Callable[[Sequence[RetrievedChunk], Sequence[Hashable]], list[RetrievedChunk]]


class RiderStrategy(Protocol):
    """A strategy that may add cache riders: it has ``takes_riders = True`` and returns every
    chunk of ``chunks`` plus at most ``max_riders`` chunks of ``candidates``, in prompt order."""

    takes_riders: bool

    def __call__(
        self,
        chunks: Sequence[RetrievedChunk],
        prefix: Sequence[Hashable],
        candidates: Sequence[RetrievedChunk] = (),
        max_riders: int = 0,
    ) -> list[RetrievedChunk]: ...


class Observer(Protocol):
    """Something that follows every request sent to the engine (e.g. a cache shadow)."""

    def observe(self, sent: Sent) -> None: ...


def riders_in(
    ordered: Sequence[RetrievedChunk], candidates: Sequence[RetrievedChunk]
) -> list[RetrievedChunk]:
    """The candidates that ``order()`` placed as cache riders, best ranked first."""
    placed = {c.chunk_id for c in ordered}
    return [c for c in candidates if c.chunk_id in placed]


class OrderingError(ValueError):
    """An unknown or unavailable strategy."""


def relevance_order(
    chunks: Sequence[RetrievedChunk], prefix: Sequence[Hashable]
) -> list[RetrievedChunk]:
    """The retriever's order, most relevant first (the baseline)."""
    return list(chunks)


def doc_id_order(
    chunks: Sequence[RetrievedChunk], prefix: Sequence[Hashable]
) -> list[RetrievedChunk]:
    """Source order: by document, then chunk id (a stable order that ignores relevance)."""
    return sorted(chunks, key=lambda c: (c.document_id, c.chunk_id))


class ContextOrdering:
    """Named strategies plus the observers that follow what was sent, whichever strategy
    ordered it (an A/B switch must not blind the cache shadow). Thread-safe."""

    def __init__(
        self, strategies: Mapping[str, Strategy], observers: Sequence[Observer] = ()
    ) -> None:
        self._strategies = dict(strategies)
        self._observers = list(observers)
        self._weights: dict[int, int] = {}  # chunk id -> prompt tokens, learned from order()
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        """The strategies available in this process."""
        return list(self._strategies)

    def predicted_cached(self, path: Sequence[Hashable]) -> int:
        """Tokens of ``path`` the engine should find cached, by the first observer with a cache
        shadow (0 without one)."""
        with self._lock:
            for observer in self._observers:
                predict = getattr(observer, "predicted_cached", None)
                if predict is not None:
                    return int(predict(path))
        return 0

    def strategy(self, name: str) -> Strategy:
        """The strategy object registered as ``name`` (``KeyError`` if none)."""
        return self._strategies[name]

    def takes_riders(self, strategy: str) -> bool:
        """Whether ``strategy`` uses candidates (so a caller can skip retrieving them)."""
        return bool(getattr(self._strategies.get(strategy), "takes_riders", False))

    def order(
        self,
        strategy: str,
        chunks: Sequence[RetrievedChunk],
        prefix: Sequence[Hashable],
        candidates: Sequence[RetrievedChunk] = (),
        max_riders: int | None = None,
        tally: bool = True,
    ) -> list[RetrievedChunk]:
        """``chunks`` (required, most relevant first) in prompt order. ``candidates`` (ranked,
        optional) may add at most ``max_riders`` riders (default: as many as offered; 0: none)
        where the strategy takes riders; the riders are the returned chunks not in ``chunks``.
        ``tally=False`` orders a second layout of a turn already ordered once: strategies that
        count what is retrieved (``takes_riders`` ones) do not count it again."""
        try:
            fn = self._strategies[strategy]
        except KeyError:
            raise OrderingError(
                f"unknown ordering strategy {strategy!r}; available: {', '.join(self.names())}"
            ) from None
        required = {c.chunk_id for c in chunks}
        offered = list({c.chunk_id: c for c in candidates if c.chunk_id not in required}.values())
        budget = len(offered) if max_riders is None else max(0, min(max_riders, len(offered)))
        with self._lock:
            for c in (*chunks, *offered):
                self._weights[c.chunk_id] = chunk_weight(c)
            counted = {} if tally or not getattr(fn, "takes_riders", False) else {"tally": False}
            if not (budget and getattr(fn, "takes_riders", False)):
                return fn(chunks, prefix, **counted)
            out = fn(chunks, prefix, candidates=offered, max_riders=budget, **counted)
        placed = [c.chunk_id for c in out]
        riders = set(placed) - required
        if (
            len(placed) != len(set(placed))
            or not required <= set(placed)
            or not riders <= {c.chunk_id for c in offered}
            or len(riders) > budget
        ):
            raise OrderingError(f"strategy {strategy!r} broke the rider contract")
        return out

    def observe(
        self,
        prefix: Sequence[Hashable],
        chunk_ids: Sequence[Hashable],
        prompt_tokens: int,
        cached_tokens: int,
        page_tokens: int = 1,
        *,
        tail: Hashable | None = None,
        answer: Hashable | None = None,
        completion_tokens: int = 0,
        worker: str = "",
        after: Sequence[Hashable] = (),
    ) -> None:
        """What one finished request sent and what was cached: ``prefix`` (the keys of everything
        before this turn's documents, ``rag.prompt_keys.shadow_prefix``), the chunk ids rendered in
        this turn in prompt order, the key of the rest of its user message (``tail``) and of the
        answer the engine generated, which it caches too. The engine caches in whole pages of
        ``page_tokens`` (``EngineInfo.cache_page_tokens``); ``worker`` is the engine worker that
        served it, where a gateway says so; ``after`` the keys between this turn's documents
        and ``tail`` (a re-laid history, ``rag.layout``). A chunk key may be ``(id, number)``
        (a chunk rendered under another number than its position, ``rag.layout.block_key``)."""
        with self._lock:
            weights = {
                k: self._weights[_chunk_of(k)]
                for k in (*prefix, *chunk_ids)
                if _chunk_of(k) in self._weights
            }
            sent = Sent(
                tuple(prefix),
                tuple(chunk_ids),
                prompt_tokens,
                cached_tokens,
                page_tokens,
                tail,
                answer,
                completion_tokens,
                weights,
                worker,
                tuple(after),
            )
            for observer in self._observers:
                observer.observe(sent)


def _chunk_of(key: Hashable) -> Hashable:
    """The chunk id of a chunk key (``id`` or ``(id, number)``); other keys as they are."""
    if isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, int) for k in key):
        return key[0]
    return key


def default_ordering(
    kv_capacity_tokens: int = 32768, workers: Sequence[str] = ()
) -> ContextOrdering:
    """relevance, doc_id, prefix (ours, with a shadow of an engine cache of
    ``kv_capacity_tokens``; behind a gateway over several ``workers``, a shadow of each
    worker's cache of that size, ``RoutedPrefixOrdering``), and contextpilot where the package
    is installed."""
    ours: PrefixOrdering | RoutedPrefixOrdering = (
        RoutedPrefixOrdering(workers, kv_capacity_tokens)
        if len(workers) > 1
        else PrefixOrdering(kv_capacity_tokens)
    )
    strategies: dict[str, Strategy] = {
        "relevance": relevance_order,
        "doc_id": doc_id_order,
        "prefix": ours,
    }
    if contextpilot_adapter.available():
        strategies["contextpilot"] = contextpilot_adapter.ContextPilotOrdering()
    return ContextOrdering(strategies, observers=[ours])
