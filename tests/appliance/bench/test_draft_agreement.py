"""The draft-agreement bench's parts: weight quantization, penalized greedy choices, and the
steps a chain of drafts takes."""

from __future__ import annotations

import pytest
import torch

from appliance.bench.draft_agreement import chain_steps, greedy_choices, quantized_copy
from engine.base import SamplingParams


class _Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.up = torch.nn.Linear(64, 32, bias=False)
        self.lm_head = torch.nn.Linear(32, 10, bias=False)


@pytest.mark.parametrize(("bits", "group"), [(8, 0), (4, 32), (4, 16)])
def test_quantized_copy_rounds_each_linear_to_its_grid_and_leaves_the_head(
    bits: int, group: int
) -> None:
    model = _Tiny()
    before = model.up.weight.detach().clone()
    q = quantized_copy(model, bits, group)
    assert torch.equal(model.up.weight, before)  # the original is untouched
    assert torch.equal(q.lm_head.weight, model.lm_head.weight)
    size = group or 64
    w = q.up.weight.view(32, 64 // size, size)
    step = before.view(32, 64 // size, size).abs().amax(-1, keepdim=True) / (2 ** (bits - 1) - 1)
    levels = w / step
    assert torch.allclose(levels, levels.round(), atol=1e-3)  # on the grid
    assert levels.abs().max() <= 2 ** (bits - 1) - 1 + 1e-3
    assert (w - before.view_as(w)).abs().le(step / 2 + 1e-6).all()  # nearest level
    with pytest.raises(ValueError, match="groups of 48"):
        quantized_copy(model, 4, 48)


def test_greedy_choices_apply_the_penalty_of_the_answer_so_far() -> None:
    logits = torch.tensor([[2.0, 1.9, 0.0], [2.0, 1.9, 0.0], [2.0, 1.9, 0.0]])
    plain = greedy_choices(logits, [0, 0, 1], SamplingParams(3))
    assert plain == [0, 0, 0]
    # token 0 was generated at position 0, so from position 1 on its logit is divided by 1.2
    penalized = greedy_choices(logits, [0, 0, 1], SamplingParams(3, repetition_penalty=1.2))
    assert penalized == [0, 1, 1]


def test_chain_steps_accept_runs_of_agreement_up_to_k() -> None:
    assert chain_steps([True] * 9, 4) == 2  # 8 tokens after the first: 5 then 3
    assert chain_steps([True] + [False] * 8, 4) == 8  # no draft ever kept: one token a step
    # positions 1-2 agree, 3 does not: the first step keeps 2 and emits the model's 3rd
    assert chain_steps([True, True, True, False, False], 4) == 2
    assert chain_steps([True], 4) == 0  # only the prefill's token
