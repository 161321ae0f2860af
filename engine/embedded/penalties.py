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
    ids: torch.Tensor,
    counts: torch.Tensor,
    generated: int,
    sp: SamplingParams,
    stop_ids: Iterable[int],
) -> torch.Tensor:
    """``logits`` with ``sp``'s penalties applied (a new float32 tensor). ``ids`` (int64) are
    the distinct tokens generated so far, ``counts`` (float32) how often each was, and
    ``generated`` how many tokens were. Only those tokens' logits change, so only they are
    computed: the same float32 operations as over the whole vocabulary with zero counts
    elsewhere (where they leave a logit as it is), at a fraction of the cost (a 49k
    vocabulary: two full-width ``where`` passes and a clone were ~0.2 ms a token)."""
    out = logits.to(torch.float32, copy=True)
    seen = len(ids) > 0
    if seen and (sp.frequency_penalty or sp.presence_penalty):
        values = out[ids]
        if sp.frequency_penalty:
            values -= counts * sp.frequency_penalty
        if sp.presence_penalty:
            values -= torch.ones_like(values) * sp.presence_penalty
        out[ids] = values
    if generated < sp.min_new_tokens:
        stops = [i for i in stop_ids if 0 <= i < out.numel()]
        if stops:
            out[stops] = float("-inf")
    if seen and sp.repetition_penalty != 1.0:
        p = sp.repetition_penalty
        values = out[ids]
        out[ids] = torch.where(values < 0, values * p, values / p)
    return out


class Penalizer:
    """One request's token counts; ``apply`` before each sample, ``observe`` after it."""

    def __init__(self, sp: SamplingParams, stop_ids: frozenset[int]) -> None:
        self.sp = sp
        self.stop_ids = stop_ids
        self.active = sp.penalized
        self.seen: dict[int, int] = {}  # token -> times generated, in first-seen order
        self.generated = 0
        self._tensors: tuple[torch.Tensor, torch.Tensor] | None = None  # (ids, counts), cached

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.active:
            return logits
        if self._tensors is None:
            self._tensors = (
                torch.tensor(list(self.seen), dtype=torch.int64),
                torch.tensor(list(self.seen.values()), dtype=torch.float32),
            )
        ids, counts = self._tensors
        return penalize(logits, ids, counts, self.generated, self.sp, self.stop_ids)

    def observe(self, token: int) -> None:
        """Count ``token``, sampled from the logits ``apply`` returned."""
        self.generated += 1
        if self.active and token >= 0:
            self.seen[token] = self.seen.get(token, 0) + 1
            self._tensors = None
