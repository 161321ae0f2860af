"""The pool of earlier answers that drafts may come from (pure: token ids in, drafts out)."""

from __future__ import annotations

import threading

import pytest

from engine.embedded.draft_pool import DraftPool
from engine.embedded.ngram_draft import DraftConfig, NgramDrafter


def test_the_longest_match_wins_and_newer_answers_first() -> None:
    pool = DraftPool(1000, 3)
    pool.add([1, 2, 3, 4, 5, 6])
    assert pool.match([9, 1, 2, 3], 4) == (3, [4, 5, 6])
    assert pool.match([9, 8, 3], 2) == (1, [4, 5])
    pool.add([7, 3, 9, 9])
    assert pool.match([8, 3], 4) == (1, [9, 9])  # the newer answer's "3"
    assert pool.match([2, 3], 4) == (2, [4, 5, 6])  # a longer match in the older one
    assert pool.match([42], 4) == (0, []) and pool.match([1, 2], 0) == (0, [])


def test_a_draft_never_runs_into_the_next_answer_and_ends_are_not_indexed() -> None:
    pool = DraftPool(1000, 2)
    pool.add([1, 2, 3])
    pool.add([4, 5, 6])
    assert pool.match([1, 2], 4) == (2, [3])
    assert pool.match([3], 4) == (0, [])  # nothing followed the first answer's last token
    # n-grams do not span two answers: "3 4" is no bigram of the pool
    assert pool.match([3, 4], 4) == (1, [5, 6])


def test_memory_is_bounded_and_the_oldest_answers_go_first() -> None:
    pool = DraftPool(100, 3)
    for start in range(0, 1000, 20):
        pool.add(list(range(start, start + 20)))
    assert 50 <= pool.size <= 100
    assert pool.match([980, 981], 2) == (2, [982, 983])
    assert pool.match([0, 1], 2) == (0, [])
    pool.add(list(range(10_000, 10_500)))  # one huge answer keeps half the capacity of it
    assert pool.size <= 100
    pool.clear()
    assert pool.size == 0 and pool.match([980, 981], 2) == (0, [])


def test_a_pool_of_capacity_zero_holds_nothing() -> None:
    pool = DraftPool(0, 3)
    pool.add([1, 2, 3, 4])
    assert not pool.enabled and pool.size == 0 and pool.match([1, 2], 4) == (0, [])
    with pytest.raises(ValueError):
        DraftPool(-1, 3)


def test_the_drafter_asks_the_pool_only_for_a_longer_match_than_its_own() -> None:
    pool = DraftPool(1000, 3)
    pool.add([5, 6, 7, 40, 41, 42, 43])
    config = DraftConfig(max_tokens=4, max_ngram=3)
    # own history: only the unigram "7" (followed by 8); the pool has the trigram: up to 4
    assert NgramDrafter(config, [7, 8, 5, 6, 7], pool).propose() == [40, 41, 42, 43]
    # the same trigram in the request's own history wins over the pool's
    assert NgramDrafter(config, [5, 6, 7, 9, 5, 6, 7], pool).propose() == [9, 5, 6, 7]
    # the pool's bigram against no own match: two tokens, the usual rule below max_ngram
    assert NgramDrafter(config, [1, 6, 7], pool).propose() == [40, 41]
    # without the pool, or with an empty one, nothing
    assert NgramDrafter(config, [1, 6, 7]).propose() == []
    assert NgramDrafter(config, [1, 6, 7], DraftPool(0, 3)).propose() == []
    # a single token of another answer is no evidence: the pool's unigram is never tried
    assert NgramDrafter(config, [1, 2, 7], pool).propose() == []


def test_a_longer_match_in_an_earlier_answer_beats_the_requests_own() -> None:
    """The engine's pool matches n-grams one longer than the request's own history does."""
    pool = DraftPool(1000, 4)
    pool.add([1, 5, 6, 7, 40, 41, 42, 43])
    config = DraftConfig(max_tokens=4, max_ngram=3)
    # own history: the trigram "5 6 7" followed by 9; the pool: the 4-gram "1 5 6 7"
    assert NgramDrafter(config, [5, 6, 7, 9, 1, 5, 6, 7], pool).propose() == [40, 41, 42, 43]
    # where only the trigram matches the pool too, the request's own history wins
    assert NgramDrafter(config, [5, 6, 7, 9, 2, 5, 6, 7], pool).propose() == [9, 2, 5, 6]


def test_answers_are_added_while_others_draft() -> None:
    pool = DraftPool(5000, 3)
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(300):
                pool.add([i % 50, (i + 1) % 50, (i + 2) % 50, i])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    drafter = NgramDrafter(DraftConfig(), [1, 2], pool)
    while thread.is_alive():
        for draft in (drafter.propose(), pool.match([3, 4, 5], 4)[1]):
            assert len(draft) <= 4
    thread.join()
    assert not errors and pool.match([1, 2, 3], 4)[0] == 3
