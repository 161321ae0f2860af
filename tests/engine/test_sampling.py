"""Sampling: the top-p nucleus found among the top candidates is the one a full sort finds
(SGLang's rule: drop a token once the mass before it exceeds top_p); greedy is argmax."""

from __future__ import annotations

import pytest
import torch

from engine.embedded.sampling import NUCLEUS_CANDIDATES, make_generator, nucleus, sample_next


def _full_sort_nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    sorted_probs, order = torch.sort(probs, descending=True)
    drop = torch.cumsum(sorted_probs, dim=-1) - sorted_probs > top_p
    sorted_probs[drop] = 0.0
    kept = torch.zeros_like(probs).scatter_(0, order, sorted_probs)
    return kept / kept.sum()


@pytest.mark.parametrize("sharpness", [8.0, 2.0, 0.01])  # peaked ... nearly flat (full sort)
@pytest.mark.parametrize("top_p", [0.3, 0.9, 0.999])
def test_nucleus_matches_a_full_sort(sharpness: float, top_p: float) -> None:
    gen = torch.Generator().manual_seed(int(sharpness * 100 + top_p * 1000))
    probs = torch.softmax(torch.randn(49152, generator=gen) * sharpness, dim=-1)
    got = nucleus(probs, top_p)
    assert torch.allclose(got, _full_sort_nucleus(probs, top_p), atol=1e-9)
    kept = int((got > 0).sum())
    assert kept >= 1 and float(probs[got > 0].sum()) >= min(top_p, float(probs.sum())) - 1e-5
    if sharpness == 0.01:  # the candidates cannot hold the mass: the full sort ran
        assert kept > NUCLEUS_CANDIDATES


def test_seeded_top_p_sampling_is_reproducible() -> None:
    logits = torch.randn(49152, generator=torch.Generator().manual_seed(1)) * 4
    draws = [[sample_next(logits, 0.8, 0.9, make_generator(7)) for _ in range(3)] for _ in range(2)]
    assert draws[0] == draws[1]
    assert sample_next(logits, 0.0, 0.9) == int(logits.argmax())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_greedy_takes_the_first_of_equal_best_tokens(dtype: torch.dtype) -> None:
    """Greedy is argmax's choice, ties included (bfloat16 logits tie often): the first."""
    logits = torch.zeros(49152, dtype=dtype)
    logits[[7, 9000, 40000]] = 3.0
    assert sample_next(logits, 0.0, 1.0) == 7
    assert sample_next(logits, 0.7, 1.0, top_k=1) == 7
    gen = torch.Generator().manual_seed(5)
    for _ in range(50):
        row = (torch.randn(49152, generator=gen) * 2).round().to(dtype)  # many ties at the top
        assert sample_next(row, 0.0, 1.0) == int(torch.argmax(row))
