"""The ordering behind a gateway: a shadow per worker (``RoutedPrefixOrdering``) against two real
token-level radix caches, with a gateway that sends a request to the worker holding its
longest prefix, except when it balances load."""

from __future__ import annotations

import random

import pytest
from test_ordering import chunk
from test_ordering_shadow import SYSTEM, request_ids, segment_tokens

from appliance.bench.ordering.radix import RadixLRU
from rag.ordering import default_ordering
from rag.ordering.prefix import PrefixOrdering
from rag.ordering.routed import RoutedPrefixOrdering
from rag.ordering.sent import Sent

A, B = "http://127.0.0.1:30001", "http://127.0.0.1:30002"


def sent(chunks: list[int], cached: int, worker: str, n: int) -> Sent:
    ids = request_ids(chunks)
    weights = {"system": len(SYSTEM)}
    weights |= {c: len(segment_tokens(c, p)) for p, c in enumerate(chunks)}
    return Sent(("system",), tuple(chunks), len(ids), cached, tail=("q", n), weights=weights,
                worker=worker)  # fmt: skip


def test_a_shadow_per_worker_follows_two_caches_where_one_shadow_cannot() -> None:
    rng = random.Random(11)
    caches = {A: RadixLRU(1500), B: RadixLRU(1500)}
    one = PrefixOrdering(3000)  # one shadow sized at the workers' total
    routed = RoutedPrefixOrdering([A, B + "/"], 1500)
    error_one = error_routed = error_guessed = total = 0
    for n in range(400):
        chunks = list(dict.fromkeys(rng.choices(range(10), weights=range(10, 0, -1), k=4)))
        ids = request_ids(chunks)
        held = {w: cache.match(ids[:-1]) for w, cache in caches.items()}
        home = max(held, key=lambda w: (held[w], w == A))
        worker = home if n % 3 else (B if home == A else A)  # every third request: balanced
        cached = held[worker]
        caches[worker].insert(ids)
        report = sent(chunks, cached, worker, n)
        path = ("system", *chunks, ("q", n))
        error_one += abs(one.shadow.predicted_cached(path) - cached)
        error_routed += abs(routed.predicted_cached(path, worker) - cached)
        guess = routed.route(("system",), chunks)
        error_guessed += abs(routed.predicted_cached(path, guess) - cached)
        total += len(ids)
        one.observe(report)
        routed.observe(report)
    # told the route, the per-worker shadows are all but exact; one shadow is far off, since a
    # request sent to the other worker looks to it like an eviction
    assert error_routed <= 0.02 * total, (error_routed, total)
    assert error_one >= 5 * error_routed and error_one >= 0.05 * total, (error_one, total)
    assert error_guessed < error_one


def test_requests_are_laid_out_against_the_worker_holding_their_prefix() -> None:
    routed = RoutedPrefixOrdering([A, B], 10_000)
    routed.observe(sent([3, 4, 5], 0, A, 0))
    routed.observe(sent([7, 8], 0, B, 1))
    assert routed.route(("system",), [5, 4, 3, 9]) == A
    assert routed.route(("system",), [8, 7]) == B
    # the cached path on A first (3, 4), then the rest; the most relevant uncached chunk last
    out = routed([chunk(9), chunk(3), chunk(4)], ("system",))
    assert [c.chunk_id for c in out] == [3, 4, 9]
    # an answer the gateway did not name a worker for is followed where it most likely went
    reused = len(SYSTEM) + len(segment_tokens(3, 0)) + len(segment_tokens(4, 1))
    routed.observe(sent([3, 4, 6], reused, "", 2))
    assert routed.workers[A].shadow.find(("system", 3, 4, 6)) is not None
    assert routed.workers[B].shadow.find(("system", 3, 4, 6)) is None
    # a tie (nothing held anywhere) goes to the worker holding the fewest tokens
    assert routed.route(("other",), [1]) == B


def test_default_ordering_uses_a_shadow_per_worker_behind_a_gateway() -> None:
    assert isinstance(default_ordering(4096, workers=(A, B)).strategy("prefix"),
                      RoutedPrefixOrdering)  # fmt: skip
    assert isinstance(default_ordering(4096, workers=(A,)).strategy("prefix"), PrefixOrdering)
    for bad in ((), (A, A + "/")):
        with pytest.raises(ValueError):
            RoutedPrefixOrdering(bad, 100)
