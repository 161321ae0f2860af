"""Each penalty and truncation against SGLang's definitions, on a fixed logits vector.

The references below restate SGLang's batched code (``penaltylib``: scatter-added frequency,
scattered presence and repetition values over the generated tokens, ``-inf`` on stop tokens
below ``min_new_tokens``; ``top_k_top_p_min_p_sampling_from_probs_torch``) for one row.
"""

from __future__ import annotations

import math

import pytest
import torch

from engine.base import SamplingParams, sampling_problem
from engine.embedded.penalties import Penalizer, penalize
from engine.embedded.sampling import sample_next, truncate

LOGITS = torch.tensor([2.0, -1.0, 0.5, -3.0, 4.0, 0.0, 1.5, -0.5])
GENERATED = [4, 2, 4, 1, 4]  # token 4 three times, 2 and 1 once; the prompt does not count
EOS = frozenset({7})


def _counts() -> tuple[torch.Tensor, torch.Tensor]:
    """(distinct generated tokens, how often each was): what ``penalize`` takes."""
    ids, counts = torch.unique(torch.tensor(GENERATED), return_counts=True)
    return ids, counts.float()


def _sglang_row(sp: SamplingParams, generated: list[int]) -> torch.Tensor:
    """One row of SGLang's penalizers: additive (frequency, presence, min-new-tokens), then
    the scaling repetition penalty (``apply_scaling_penalties``)."""
    vocab = LOGITS.numel()
    ids = torch.tensor(generated, dtype=torch.int64)
    freq = torch.zeros(vocab).scatter_add_(0, ids, torch.full((len(ids),), sp.frequency_penalty))
    pres = torch.zeros(vocab).scatter_(0, ids, sp.presence_penalty)
    scale = torch.ones(vocab).scatter_(0, ids, sp.repetition_penalty)
    out = LOGITS.clone() - freq - pres
    if len(generated) < sp.min_new_tokens:
        out[sorted(EOS)] += float("-inf")
    return torch.where(out < 0, out * scale, out / scale)


@pytest.mark.parametrize(
    "sp",
    [
        SamplingParams(frequency_penalty=0.5),
        SamplingParams(frequency_penalty=-1.25),
        SamplingParams(presence_penalty=0.7),
        SamplingParams(repetition_penalty=1.3),
        SamplingParams(repetition_penalty=0.8),
        SamplingParams(frequency_penalty=0.4, presence_penalty=0.3, repetition_penalty=1.2),
        SamplingParams(min_new_tokens=6),
    ],
    ids=["freq", "freq-neg", "presence", "rep", "rep-below-1", "all", "min-new"],
)
def test_each_penalty_matches_sglang(sp: SamplingParams) -> None:
    got = penalize(LOGITS, *_counts(), len(GENERATED), sp, EOS)
    assert got.dtype == torch.float32
    assert torch.allclose(got, _sglang_row(sp, GENERATED), atol=1e-6)


def test_penalties_by_hand() -> None:
    """The same definitions as numbers: count * frequency, presence once, repetition divides
    positive and multiplies negative logits; unseen tokens keep their logits."""
    (ids, counts), n = _counts(), len(GENERATED)
    freq = penalize(LOGITS, ids, counts, n, SamplingParams(frequency_penalty=0.5), EOS)
    assert freq[4] == pytest.approx(4.0 - 3 * 0.5) and freq[2] == pytest.approx(0.0)
    pres = penalize(LOGITS, ids, counts, n, SamplingParams(presence_penalty=0.5), EOS)
    assert pres[4] == pytest.approx(3.5) and pres[1] == pytest.approx(-1.5)
    rep = penalize(LOGITS, ids, counts, n, SamplingParams(repetition_penalty=2.0), EOS)
    assert (rep[4], rep[2], rep[1]) == (pytest.approx(2.0), pytest.approx(0.25), -2.0)
    assert torch.equal(rep[[0, 3, 5, 6, 7]], LOGITS[[0, 3, 5, 6, 7]])


def _dense(logits: torch.Tensor, counts: torch.Tensor, generated: int, sp: SamplingParams):  # noqa: ANN202
    """The penalties over the whole vocabulary, zero counts for unseen tokens (the form the
    engine used before computing only the generated tokens' logits)."""
    out = logits.float().clone()
    seen = counts > 0
    out -= counts * sp.frequency_penalty
    out -= seen.float() * sp.presence_penalty
    if generated < sp.min_new_tokens:
        out[sorted(EOS)] = float("-inf")
    p = sp.repetition_penalty
    return torch.where(seen, torch.where(out < 0, out * p, out / p), out)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("seed", range(6))
def test_penalising_only_the_generated_tokens_equals_the_whole_vocabulary(
    dtype: torch.dtype, seed: int
) -> None:
    gen = torch.Generator().manual_seed(seed)
    vocab = 49152
    logits = (torch.randn(vocab, generator=gen) * 8).to(dtype)
    tokens = torch.randint(
        0, vocab, (int(torch.randint(1, 120, (1,), generator=gen)),), generator=gen
    )
    tokens[::3] = tokens[0]  # repeats
    values = torch.rand(4, generator=gen).tolist()
    sp = SamplingParams(
        frequency_penalty=values[0] * 2 - 1,
        presence_penalty=values[1] - 0.5,
        repetition_penalty=0.7 + values[2],
        min_new_tokens=int(values[3] * 200),
    )
    pen = Penalizer(sp, EOS)
    for token in tokens.tolist():
        pen.observe(token)
    counts = torch.bincount(tokens, minlength=vocab).float()
    assert torch.equal(pen.apply(logits), _dense(logits, counts, len(tokens), sp))
    assert pen.apply(logits).data_ptr() != logits.data_ptr()  # a new tensor, the input intact


def test_min_new_tokens_masks_eos_until_reached() -> None:
    pen = Penalizer(SamplingParams(min_new_tokens=2), EOS)
    eos_first = torch.zeros(8)
    eos_first[7] = 10.0
    for step in range(3):
        out = pen.apply(eos_first)
        assert (out[7] == float("-inf")) == (step < 2)
        pen.observe(int(out.argmax()))


def test_penalizer_counts_only_what_it_observed() -> None:
    sp = SamplingParams(frequency_penalty=1.0, repetition_penalty=1.5)
    pen = Penalizer(sp, EOS)
    for token in GENERATED:  # as a request runs: apply before each sample, observe after
        pen.apply(LOGITS)
        pen.observe(token)
    assert torch.allclose(pen.apply(LOGITS), _sglang_row(sp, GENERATED), atol=1e-6)
    assert Penalizer(SamplingParams(), EOS).apply(LOGITS) is LOGITS  # neutral: untouched


def _sglang_truncate(probs: torch.Tensor, top_k: int, top_p: float, min_p: float) -> torch.Tensor:
    sorted_probs, order = probs.sort(descending=True)
    cumulative = torch.cumsum(sorted_probs, dim=-1)
    sorted_probs[torch.arange(probs.numel()) >= top_k] = 0.0
    sorted_probs[(cumulative - sorted_probs) > top_p] = 0.0
    sorted_probs[sorted_probs < sorted_probs[0] * min_p] = 0.0
    kept = torch.zeros_like(probs).scatter_(0, order, sorted_probs)
    return kept / kept.sum()


@pytest.mark.parametrize(
    ("top_k", "top_p", "min_p"),
    [(3, 1.0, 0.0), (1 << 30, 0.6, 0.0), (1 << 30, 1.0, 0.2), (4, 0.8, 0.05), (2000, 0.99, 0.0)],
)
@pytest.mark.parametrize("vocab", [8, 49152])
def test_truncation_matches_sglang(vocab: int, top_k: int, top_p: float, min_p: float) -> None:
    gen = torch.Generator().manual_seed(vocab + top_k)
    logits = LOGITS if vocab == 8 else torch.randn(vocab, generator=gen) * 3
    probs = torch.softmax(logits, dim=-1)
    k = -1 if top_k >= 1 << 30 else top_k
    got = truncate(probs, top_k=k, top_p=top_p, min_p=min_p)
    assert torch.allclose(got, _sglang_truncate(probs.clone(), top_k, top_p, min_p), atol=1e-7)


def test_greedy_sees_the_penalties_and_top_k_1_is_greedy() -> None:
    sp = SamplingParams(repetition_penalty=2.0)
    penalized = penalize(LOGITS, *_counts(), len(GENERATED), sp, EOS)
    assert int(LOGITS.argmax()) == 4 and sample_next(penalized, 0.0, 1.0) == 0
    assert sample_next(LOGITS, 0.9, 1.0, torch.Generator().manual_seed(3), top_k=1) == 4


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"frequency_penalty": 2.5}, "frequency_penalty must be in [-2, 2]"),
        ({"presence_penalty": -3.0}, "presence_penalty must be in [-2, 2]"),
        ({"repetition_penalty": 0.0}, "repetition_penalty must be in (0, 2]"),
        ({"repetition_penalty": math.nan}, "repetition_penalty must be in (0, 2]"),
        ({"min_p": 1.5}, "min_p must be in [0, 1]"),
        ({"top_k": 0}, "top_k must be -1 (disable) or at least 1"),
        ({"min_new_tokens": 300}, "min_new_tokens must be in [0, max_new_tokens(256)]"),
    ],
)
def test_out_of_range_values_get_sglangs_message(changes: dict, words: str) -> None:
    problem = sampling_problem(SamplingParams(**changes))
    assert problem is not None and problem.startswith(words)
    assert sampling_problem(SamplingParams(top_k=1, min_p=1.0, repetition_penalty=2.0)) is None
