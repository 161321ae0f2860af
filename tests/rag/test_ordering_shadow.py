"""The cache shadow against a real token-level radix cache: the embedded engine's own
``RadixKVCache`` (without tensors) and the benchmark's ``RadixLRU``, which must agree with it."""

from __future__ import annotations

import random

from appliance.bench.ordering.radix import RadixLRU
from engine.embedded.radix_cache import RadixKVCache, match_length
from rag.ordering.shadow import ShadowTrie

SYSTEM = tuple(range(1000, 1300))  # a 300-token system prompt


def segment_tokens(chunk: int, position: int) -> tuple[int, ...]:
    """A chunk's tokens as rendered at ``position`` (the number changes the first token), so
    different segments never share tokens by accident."""
    rng = random.Random(chunk)
    return (
        10_000 + 100 * chunk + position,
        *(rng.randrange(20_000, 30_000) for _ in range(40 + chunk % 7 * 10)),
    )


def request_ids(chunks: list[int]) -> list[int]:
    ids = list(SYSTEM)
    for pos, c in enumerate(chunks):
        ids += segment_tokens(c, pos)
    return ids


def weights(chunks: list[int]) -> list[int]:
    return [len(SYSTEM)] + [len(segment_tokens(c, p)) for p, c in enumerate(chunks)]


def test_benchmark_radix_lru_agrees_with_the_engine_radix_cache() -> None:
    rng = random.Random(7)
    engine_cache, sim = RadixKVCache(budget_tokens=1500), RadixLRU(budget_tokens=1500)
    for _ in range(300):
        ids = request_ids(rng.sample(range(12), rng.randint(1, 4)))
        n_engine, _kv = engine_cache.match(ids[:-1])
        assert sim.match(ids[:-1]) == n_engine
        engine_cache.insert(ids, [])
        sim.insert(ids)
        assert sim.total_tokens == engine_cache.total_tokens <= 1500
    probe = request_ids([0, 1, 2])
    assert RadixLRU(10).match(probe) == 0
    assert sim.match(probe) == match_length(engine_cache, probe)


def play(
    capacity: int, shadow_capacity: int, requests: int = 400, sync: bool = True
) -> tuple[int, int, int]:
    """Requests of 1-4 chunks from 10 (popular ones more often) through the radix cache, with the
    shadow following; returns (sum of |predicted - cached|, sum of cached, over-predictions)."""
    rng = random.Random(3)
    radix, shadow = RadixLRU(capacity), ShadowTrie(shadow_capacity)
    error = total = over = 0
    for _ in range(requests):
        chunks = list(dict.fromkeys(rng.choices(range(10), weights=range(10, 0, -1), k=4)))
        path = ["system", *chunks]
        ids = request_ids(chunks)
        predicted = shadow.predicted_cached(path)
        cached = radix.match(ids[:-1])
        error += abs(predicted - cached)
        total += cached
        over += predicted > cached + 1
        if sync:
            shadow.sync(path, cached)
        shadow.record(path, weights(chunks))
        radix.insert(ids)
    return error, total, over


def test_shadow_predicts_the_radix_cache_exactly_without_eviction() -> None:
    error, total, over = play(capacity=10**6, shadow_capacity=10**6)
    assert total > 0
    # the last token of a prompt is never matched (the engine computes at least one)
    assert error <= 400 and over == 0


def test_shadow_tracks_an_evicting_cache_and_its_reports() -> None:
    # capacity pressure: a few requests' worth of tokens
    synced_error, total, over = play(capacity=1200, shadow_capacity=1200)
    assert total > 0 and synced_error / total < 0.02 and over < 30
    # a shadow that believes the cache is 20x larger is corrected by the engine's reports...
    wrong_error, _, wrong_over = play(capacity=1200, shadow_capacity=24_000)
    assert wrong_error / total < 0.05 and wrong_over < 60
    # ...and without them it would keep predicting hits that are gone
    blind_error, _, blind_over = play(capacity=1200, shadow_capacity=24_000, sync=False)
    assert blind_error > 3 * wrong_error and blind_over > 3 * wrong_over


def test_shadow_lru_eviction_and_sync_forget_what_the_engine_dropped() -> None:
    shadow = ShadowTrie(capacity_tokens=1000)
    shadow.record(["s", 1, 2], [300, 200, 200])
    shadow.record(["s", 3], [300, 200])
    assert shadow.total_tokens == 900
    shadow.record(["s", 4], [300, 300])  # over capacity: the LRU leaf (2) goes
    assert shadow.find(["s", 1, 2]) is None and shadow.find(["s", 1]) is not None
    assert shadow.total_tokens == 1000
    shadow.record(["s", 3], [300, 200])
    shadow.record(["s", 5], [300, 100])  # then 1, the least recently used leaf
    assert shadow.find(["s", 1]) is None and shadow.find(["s", 4]) is not None
    # the engine reports nothing cached for a path the shadow holds: everything older goes
    assert shadow.sync(["s", 4], cached_tokens=0) is True
    assert shadow.find(["s"]) is None and shadow.total_tokens == 0
    assert shadow.capacity < 1000
    # longest token-weighted path, not the longest by count
    shadow.clear()
    shadow.record(["s", 1, 2], [10, 50, 50])
    shadow.record(["s", 3], [10, 400])
    assert shadow.longest_path(shadow.find(["s"]), {1, 2, 3}) == [3]
    assert shadow.longest_path(shadow.find(["s"]), {1, 2}) == [1, 2]


def test_a_paged_cache_reuses_whole_pages_and_the_shadow_follows_it() -> None:
    """An engine that caches whole pages (SGLang ``--page-size``, vLLM blocks): the simulator
    cuts matches and stored sequences to pages, and the shadow does not mistake a report one
    page short for an eviction."""
    paged, exact = RadixLRU(10**6, page_tokens=128), RadixLRU(10**6)
    first, second = request_ids([1, 2]), request_ids([1, 3])
    for cache in (paged, exact):
        cache.insert(first)
    shared = len(SYSTEM) + len(segment_tokens(1, 0))
    assert exact.match(second) == shared
    assert paged.match(second) == shared - shared % 128 < shared
    assert paged.match(first) == len(first) - len(first) % 128  # a partial last page is lost

    shadow = ShadowTrie(capacity_tokens=10**6)
    shadow.record(["s", 1], [len(SYSTEM), len(segment_tokens(1, 0))])
    reported = paged.match(second)
    assert shadow.sync(["s", 1], reported, page_tokens=128) is False
    assert shadow.find(["s", 1]) is not None
    # a segment weight is an estimate: a page short plus the usual slack is not an eviction
    # either (seen: an estimated weight made a 128-token page cut look like one, the shadow
    # forgot everything older, and prefix+rider needed 0.996 x ContextPilot's prefill at 64k
    # tokens with 128-token pages; 0.902 x once fixed)
    estimated = ShadowTrie(capacity_tokens=10**6)
    estimated.record(["s", 1], [len(SYSTEM), len(segment_tokens(1, 0)) + 30])
    assert estimated.sync(["s", 1], reported, page_tokens=128) is False
    assert estimated.sync(["s", 1], reported - 128, page_tokens=128) is True  # a page more
    # the same report from a page-1 engine means the chunk was evicted
    assert shadow.sync(["s", 1], reported, page_tokens=1) is True


def test_a_shortfall_forgets_what_lru_dropped_but_not_what_the_engine_matched() -> None:
    shadow = ShadowTrie(capacity_tokens=10_000)
    shadow.record(["s", 1, "user:a"], [1000, 200, 50])  # an older conversation
    shadow.record(["s", 2, 3, "user:b"], [1000, 200, 200, 50])  # the last request
    # the engine matched the system prompt and chunk 2, not chunk 3: chunk 3 was evicted, so
    # was every leaf used before it (the older conversation), but not what it matched, though
    # that was used by the same request (the shadow once forgot that too, and was left empty
    # with its capacity estimate at the floor)
    assert shadow.sync(["s", 2, 3, "user:c"], cached_tokens=1200) is True
    assert shadow.find(["s", 2]) is not None and shadow.find(["s", 2, 3]) is None
    assert shadow.find(["s", 1]) is None
    assert shadow.total_tokens == 1200
    # the capacity estimate falls to what the engine has just shown it holds, not below
    assert shadow.capacity == 1200
    assert shadow.predicted_cached(["s", 2, 5]) == 1200


def test_a_shortfall_inside_the_first_segment_reweights_it_instead_of_forgetting_all() -> None:
    """The system prompt's weight is an estimate (the prompt's size less its chunks' and an
    estimated tail); LRU drops it last, so a report inside it is a weight error, not an
    eviction (the shadow once forgot everything over a one-token overestimate, and a
    re-laid turn then re-weighted it from a worse estimate: predictions 35% off)."""
    shadow = ShadowTrie(capacity_tokens=10_000)
    shadow.record(["s", 1, "user:a"], [825, 200, 50])  # the system prompt is 783 tokens
    shadow.record(["s", 2, "user:b"], [825, 200, 50])
    assert shadow.sync(["s", 3, "user:c"], cached_tokens=783) is False
    assert shadow.find(["s", 1, "user:a"]) is not None and shadow.find(["s", 2]) is not None
    assert shadow.predicted_cached(["s", 2]) == 983 and shadow.capacity == 10_000
    assert shadow.total_tokens == 783 + 2 * 250
    # re-weighted, it still shows what the engine evicted after it
    shadow.record(["s", 4, "user:d"], [825, 200, 50])
    assert shadow.sync(["s", 1, "user:e"], cached_tokens=700) is True
    assert shadow.find(["s", 1]) is None and shadow.find(["s", 4]) is not None
    assert shadow.predicted_cached(["s"]) == 700
    # a report far below it still means the engine lost everything (a restart, a flush)
    assert shadow.sync(["s", 4], cached_tokens=100) is True
    assert shadow.find(["s"]) is None
