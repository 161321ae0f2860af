"""The ordering benchmark's workload knobs: how many sessions go on after their first turn,
and the ``--shape`` option that sets them from the command line."""

from __future__ import annotations

from collections import Counter

import pytest

from appliance.bench.ordering.bench import parse_shape
from appliance.bench.ordering.workload import make_workload


def turns_per_session(**shape: float) -> list[int]:
    workload = make_workload(200, seed=5, candidates=0, **shape)
    return list(Counter(t.session for t in workload.turns).values())


def test_the_default_shape_is_one_to_five_turns_and_unchanged_by_the_new_knobs() -> None:
    plain = make_workload(80, seed=2, candidates=0)
    explicit = make_workload(80, seed=2, candidates=0, max_turns=5, multi_turn_share=None)
    assert plain == explicit
    counts = turns_per_session()
    assert min(counts) == 1 and max(counts) == 5


def test_multi_turn_share_sets_how_many_sessions_have_follow_ups() -> None:
    few = turns_per_session(multi_turn_share=0.1, max_turns=8)
    most = turns_per_session(multi_turn_share=0.9, max_turns=8)
    assert sum(n > 1 for n in few) < 40 < 150 < sum(n > 1 for n in most)
    assert max(most) <= 8 and max(few) <= 8
    assert set(turns_per_session(multi_turn_share=1.0, max_turns=2)) == {2}
    assert set(turns_per_session(multi_turn_share=0.0)) == {1}


def test_shape_option_parses_key_values() -> None:
    assert parse_shape("") == {}
    assert parse_shape("top_k=8, multi_turn_share=0.9,drift=0") == {
        "top_k": 8,
        "multi_turn_share": 0.9,
        "drift": 0,
    }
    with pytest.raises(SystemExit):
        parse_shape("top_k")


def test_question_words_sets_the_question_length() -> None:
    short = make_workload(30, seed=1, candidates=0)
    long = make_workload(30, seed=1, candidates=0, question_words=40)
    assert all(len(t.question.split()) == 4 + 10 for t in short.turns)
    assert all(len(t.question.split()) == 4 + 40 for t in long.turns)
