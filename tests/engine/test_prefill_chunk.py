"""``engine/embedded/prefill_chunk.py``: the prompt tokens a step carries while others decode,
from what this CPU's linears take."""

from __future__ import annotations

from engine.embedded.draft_budget import StepCosts
from engine.embedded.prefill_chunk import DEFAULT, MOST, STEP_TARGET_S, prefill_chunk

ROWS = (1, 5, 8, 16, 128)


def costs_per_row(seconds: float) -> StepCosts:
    """Linears that cost ``seconds`` a row (a flat weight read below 16 rows)."""
    return StepCosts(ROWS, tuple(max(16, r) * seconds for r in ROWS))


def test_the_piece_is_what_the_linears_run_in_the_target_time() -> None:
    # 0.2 ms a row: 1,500 rows in 0.3 s, 1,280 in whole grains
    assert prefill_chunk(costs_per_row(0.2e-3)) == 1280
    # 0.1 ms a row: 3,000 fit, and a step carries at most MOST
    assert prefill_chunk(costs_per_row(0.1e-3)) == MOST
    # 0.45 ms a row (a 2-vCPU Zen 4): 666 fit, 512 in whole grains
    assert prefill_chunk(costs_per_row(0.45e-3)) == DEFAULT
    # slower still: never below DEFAULT, so a prompt still moves while others decode
    assert prefill_chunk(costs_per_row(5e-3)) == DEFAULT


def test_without_timings_a_step_carries_the_default() -> None:
    assert prefill_chunk(None) == DEFAULT == 512


def test_the_pieces_linears_stay_within_the_target() -> None:
    for per_row in (0.05e-3, 0.12e-3, 0.2e-3, 0.3e-3, 0.45e-3):
        chunk = prefill_chunk(costs_per_row(per_row))
        assert chunk % 256 == 0
        assert chunk == DEFAULT or chunk * per_row <= STEP_TARGET_S
