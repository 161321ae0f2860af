"""The ordering replay's floor of appended follow-ups: what a follow-up adds after its
conversation's own history, which no order of its chunks can get from the cache."""

from __future__ import annotations

from appliance.bench.ordering.radix import RadixLRU
from appliance.bench.ordering.replay import Messages, PieceTokenizer, replay, simulator_backend
from appliance.bench.ordering.workload import make_workload
from rag.ordering import default_ordering

SHAPE = {"topics": 6, "chunk_words": 20, "system_words": 40, "answer_words": 8}


def _tokens(text: str) -> list[int]:
    # one token per word: deterministic within the test run, enough for prefix matching
    return [hash(word) % 50_000 for word in text.split()]


def _play(strategy: str, layout: str | None, counted: bool = True):  # noqa: ANN202
    workload = make_workload(24, seed=3, candidates=4, **SHAPE)
    pieces = PieceTokenizer(_tokens)

    def count(messages: Messages) -> int:
        return len(pieces.chat(messages))

    backend = simulator_backend(RadixLRU(10_000_000), pieces)  # holds everything
    outcome = replay(
        workload,
        workload.turns,
        default_ordering(10_000_000),
        strategy,
        backend,
        4,
        layout=layout,
        count=count if counted else None,
    )
    follow_ups = sum(t.turn > 0 for t in workload.turns)
    return outcome, follow_ups


def test_a_cache_that_holds_everything_leaves_appended_follow_ups_at_their_floor() -> None:
    for strategy, layout in (("relevance", None), ("prefix", None), ("prefix", "adaptive")):
        outcome, follow_ups = _play(strategy, layout)
        appended = outcome.layouts["append"] - sum(outcome.first_turn)
        # nothing is evicted: a follow-up is re-laid only where that costs less than its floor
        # (its chunks sit in the cache as another conversation's block, on this small corpus)
        assert appended > follow_ups // 2
        assert outcome.appended_floor > 0
        # the floor is what they paid, but for the answer's end marker and the last token,
        # which the engine never matches
        assert outcome.appended_floor <= outcome.appended_prefill
        assert outcome.appended_prefill <= outcome.appended_floor + 2 * appended
        later = outcome.prefill_tokens - outcome.first_turn_prefill
        assert later >= outcome.appended_prefill
        if appended == follow_ups:
            assert later == outcome.appended_prefill


def test_without_a_token_count_there_is_no_floor() -> None:
    outcome, _follow_ups = _play("relevance", None, counted=False)
    assert outcome.appended_floor == 0 and outcome.appended_prefill == 0
