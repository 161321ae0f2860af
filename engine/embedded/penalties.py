"""SGLang's penalties for one request (``sglang/srt/sampling/penaltylib``), on 1-D logits.

They count only the tokens this request generated (SGLang's penalizers cumulate output tokens,
never the prompt's) and run in float32 before temperature and truncation, additive ones
first (frequency, presence, min-new-tokens), then the multiplicative repetition penalty, as
SGLang's ``apply_logits_bias`` orders them.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from engine.base import SamplingParams


def penalize(
    logits: torch.Tensor,
    counts: torch.Tensor,
    generated: int,
    sp: SamplingParams,
    stop_ids: Iterable[int],
) -> torch.Tensor:
    """``logits`` with ``sp``'s penalties applied (a new float32 tensor). ``counts[v]`` is how
    often token ``v`` was generated so far, ``generated`` how many tokens were."""
    out = logits.float().clone()
    seen = counts > 0
    if sp.frequency_penalty:
        out -= counts * sp.frequency_penalty
    if sp.presence_penalty:
        out -= seen.float() * sp.presence_penalty
    if generated < sp.min_new_tokens:
        ids = [i for i in stop_ids if 0 <= i < out.numel()]
        if ids:
            out[ids] = float("-inf")
    if sp.repetition_penalty != 1.0:
        p = sp.repetition_penalty
        out = torch.where(seen, torch.where(out < 0, out * p, out / p), out)
    return out


class Penalizer:
    """One request's token counts; ``apply`` before each sample, ``observe`` after it."""

    def __init__(self, sp: SamplingParams, stop_ids: frozenset[int]) -> None:
        self.sp = sp
        self.stop_ids = stop_ids
        self.active = sp.penalized
        self.counts: torch.Tensor | None = None  # float32 over the vocabulary, made lazily
        self.generated = 0

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.active:
            return logits
        if self.counts is None:
            self.counts = torch.zeros(logits.numel(), dtype=torch.float32)
        return penalize(logits, self.counts, self.generated, self.sp, self.stop_ids)

    def observe(self, token: int) -> None:
        self.generated += 1
        if self.counts is not None and 0 <= token < self.counts.numel():
            self.counts[token] += 1.0
