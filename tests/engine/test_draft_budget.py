"""The draft budget (``draft_budget.py``): step costs between and past the measured points, and
how many drafts a step is worth where rows ride on one read of the weights, where each row
costs its own compute, and in a step that carries a prompt chunk."""

from __future__ import annotations

import pytest

from engine.embedded.draft_budget import DraftBudget, StepCosts

# the linears' medians of two real calibrations (ms; rows 1, 2, 4, 8, 12, 16, 24, 32)
ROWS = (1, 2, 4, 8, 12, 16, 24, 32)
AVX512_ZEN4 = (10.1, 10.1, 10.7, 11.6, 11.7, 13.2, 17.1, 22.8)  # weights read once: flat
AVX2_F32 = (9.2, 9.9, 15.4, 21.3, 34.6, 39.8, 49.3, 61.6)  # every row at the FMA rate


def test_costs_interpolate_and_extrapolate_on_the_last_slope() -> None:
    costs = StepCosts((1, 8, 16), (1.0, 2.0, 4.0))
    assert costs.at(0) == costs.at(1) == 1.0
    assert costs.at(4) == pytest.approx(1.0 + 3 / 7)
    assert costs.at(12) == pytest.approx(3.0)
    assert costs.at(16) == 4.0
    assert costs.at(528) == pytest.approx(4.0 + 512 * 0.25)


def test_a_noisy_dip_does_not_make_more_rows_cheaper() -> None:
    costs = StepCosts((1, 2, 4), (2.0, 1.5, 3.0))
    assert costs.seconds == (2.0, 2.0, 3.0)
    assert costs.at(2) == 2.0


@pytest.mark.parametrize(
    ("rows", "seconds"), [((1,), (1.0,)), ((1, 2), (1.0,)), ((2, 1), (1.0, 2.0))]
)
def test_costs_refuse_what_cannot_be_interpolated(rows: tuple, seconds: tuple) -> None:
    with pytest.raises(ValueError, match="step costs"):
        StepCosts(rows, seconds)


def test_where_weights_are_read_once_every_proposed_draft_runs() -> None:
    budget = DraftBudget(StepCosts(ROWS, AVX512_ZEN4))
    assert budget.cap(1, 0, 4) == 4  # a lone stream
    assert budget.cap(8, 0, 16) == 16  # 8 streams: 16 rows cost 1.14x 8


def test_where_each_row_costs_compute_a_batch_runs_no_drafts_and_one_stream_does() -> None:
    budget = DraftBudget(StepCosts(ROWS, AVX2_F32))
    assert budget.cap(1, 0, 4) == 4  # 3 expected tokens for 1.8x the time of one
    assert budget.cap(8, 0, 16) == 0  # half a token a draft does not pay 1.9x for 16 rows
    assert budget.cap(8, 0, 0) == 0 and budget.cap(0, 0, 16) == 0


def test_the_record_moves_the_budget_and_fades_back_to_the_prior() -> None:
    budget = DraftBudget(StepCosts(ROWS, AVX2_F32))
    assert budget.rate == DraftBudget.PRIOR_RATE
    for _ in range(200):  # every draft accepted: worth a row of its own even here
        budget.record(16, 16)
    assert budget.rate > 0.99
    assert budget.cap(8, 0, 16) == 16
    for _ in range(200):
        budget.record(16, 0)
    assert budget.rate < 0.05
    assert budget.cap(1, 0, 4) == 0  # not even a lone stream's
    # steps without drafts: the record fades, and drafts get tried again
    for _ in range(400):
        budget.record(0, 0)
    assert budget.rate == pytest.approx(DraftBudget.PRIOR_RATE, abs=0.05)
    assert budget.cap(1, 0, 4) == 4


def test_a_step_carrying_a_prompt_chunk_keeps_its_drafts() -> None:
    # compute-bound at 500 rows: a draft adds 1/500 to the step and gains half a token for
    # a decoding row that waits a whole step per token
    budget = DraftBudget(StepCosts(ROWS, AVX2_F32))
    assert budget.cap(8, 500, 16) == 16
