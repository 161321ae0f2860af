"""The prompt-lookup proposer (pure: token ids in, draft tokens out)."""

from __future__ import annotations

import pytest

from engine.embedded.ngram_draft import DraftConfig, NgramDrafter


def test_proposes_what_followed_the_suffix_before() -> None:
    d = NgramDrafter(DraftConfig(max_tokens=3), [1, 2, 3, 4, 5, 9, 1, 2, 3])
    assert d.propose() == [4, 5, 9]
    assert d.propose(limit=2) == [4, 5]
    assert d.propose(limit=0) == []


def test_a_draft_is_no_longer_than_its_match_below_the_longest_ngram() -> None:
    config = DraftConfig(max_tokens=4, max_ngram=3)
    # the trigram "1 2 3" matched: up to max_tokens
    assert NgramDrafter(config, [1, 2, 3, 4, 5, 6, 7, 1, 2, 3]).propose() == [4, 5, 6, 7]
    # only the bigram "2 3": two tokens; only the unigram "3": one
    assert NgramDrafter(config, [2, 3, 4, 5, 6, 7, 9, 2, 3]).propose() == [4, 5]
    assert NgramDrafter(config, [3, 4, 5, 6, 7, 9, 3]).propose() == [4]


def test_longer_ngrams_win_and_the_latest_occurrence_wins() -> None:
    # "3" alone last followed by 7; "2 3" last followed by 4: the bigram is tried first
    d = NgramDrafter(DraftConfig(max_tokens=2, max_ngram=2), [2, 3, 4, 8, 3, 7, 2, 3])
    assert d.propose() == [4, 8]
    # a later occurrence of the same bigram replaces the earlier one
    d.extend([5, 2, 3])
    assert d.propose() == [5, 2]


def test_no_match_no_draft_and_min_ngram_is_respected() -> None:
    assert NgramDrafter(DraftConfig(), [1, 2, 3]).propose() == []
    # the unigram 3 occurred before, but unigrams are not tried
    assert NgramDrafter(DraftConfig(min_ngram=2), [3, 1, 2, 3]).propose() == []
    assert NgramDrafter(DraftConfig(min_ngram=1), [3, 1, 2, 3]).propose() == [1]


def test_appending_equals_building_at_once() -> None:
    tokens = [5, 1, 2, 5, 1, 3, 5, 1, 2, 4, 5, 1]
    grown = NgramDrafter(DraftConfig(max_tokens=4))
    for i, t in enumerate(tokens):
        grown.append(t)
        assert grown.propose() == NgramDrafter(DraftConfig(max_tokens=4), tokens[: i + 1]).propose()


def test_config_is_checked() -> None:
    with pytest.raises(ValueError):
        DraftConfig(max_tokens=0)
    with pytest.raises(ValueError):
        DraftConfig(min_ngram=3, max_ngram=2)


def test_the_pacer_grows_shrinks_and_backs_off() -> None:
    from engine.embedded.speculative import DraftPacer

    pacer = DraftPacer(4)
    assert pacer.next_length(alone=False) == 4
    pacer.update(4, 1)  # one accepted: try one past it next
    assert pacer.next_length(alone=False) == 2
    pacer.update(2, 2)  # all accepted: one more
    assert pacer.length == 3
    pacer.update(3, 0)  # none accepted: pause 2 steps, then 4, ...
    assert pacer.length == 1
    assert [pacer.next_length(alone=False) for _ in range(3)] == [0, 0, 1]
    pacer.update(1, 0)
    assert [pacer.next_length(alone=False) for _ in range(5)] == [0] * 4 + [1]
    pacer.update(1, 1)  # a hit ends the back-off
    assert pacer.misses == 0 and pacer.next_length(alone=False) == 2


def test_a_lone_stream_always_drafts_in_full() -> None:
    """Drafts cost a request that decodes alone next to nothing, so it is never paced."""
    from engine.embedded.speculative import DraftPacer

    pacer = DraftPacer(4)
    for _ in range(3):
        pacer.update(4, 0)
    assert pacer.pause and pacer.next_length(alone=True) == 4
    assert pacer.next_length(alone=False) == 0  # back in a batch, the back-off still holds
