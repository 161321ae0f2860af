"""Speculative decoding with prompt-lookup drafts: which drafts a step runs, and the acceptance
rule that turns their logits into tokens (configuration and stats: ``speculative.py``).

A decoding request with drafts ``d1 .. dk`` (``ngram_draft.py``) runs one step as its usual
decode row (its pending token, at position L) plus a short segment ``d1 .. dk`` at positions
L+1 .. L+k on its own pool row (``scheduler.py``): one forward pass scores k+1 positions.
``verify`` then walks them in order exactly as k+1 sequential decode steps would: it samples
each position with the request's own rule (penalties, grammar mask, temperature, truncation,
seeded generator, logprobs: ``Sequence.take``), and goes on to the next position only while
the sampled token equals the draft there. A step thus emits the accepted drafts plus one token
of the model's own; the pool row keeps the KV of the tokens fed and drops the rest (its length
is set back; the scheduler does it).

Acceptance rule. The standard speculative-sampling rule accepts a draft ``d`` drawn from a
proposal ``q`` with probability ``min(1, p(d) / q(d))`` and, on rejection, samples from
``max(p - q, 0)`` renormalised. A prompt-lookup draft is deterministic (``q`` is one-hot at
``d``), so the rule reads: accept with probability ``p(d)``, else sample from ``p`` with ``d``
removed. Drawing ``t ~ p`` and accepting iff ``t == d`` has exactly that law (``P(t = d) =
p(d)``, and given ``t != d``, ``t`` follows ``p`` without ``d``), so that is what ``verify``
does: the output distribution is the target model's, greedy output is token for token the
same, and since the draws use the request's generator in the same order, a seeded sampled
request gives the same text with speculation on or off.
"""

from __future__ import annotations

import torch

from engine.embedded.sequence import Sequence
from engine.embedded.speculative import SpeculativeConfig


def draft_limit(seq: Sequence, context_length: int, cap: int) -> int:
    """How many drafts ``seq`` may run this step: they must fit its token budget (the step
    emits up to drafts + 1 tokens) and the context window, and ``cap``."""
    left = seq.budget - seq.completion - 1
    room = context_length - len(seq.fed) - 2  # the pending token and drafts need positions
    return max(0, min(cap, left, room))


def verify(seq: Sequence, logits: torch.Tensor, drafts: list[int]) -> int:
    """Feed ``seq``'s pending token and emit tokens from ``logits`` (row 0 scores the position
    after the pending token, row j the one after ``drafts[j - 1]``) as sequential decode steps
    would, while the drafts agree. Returns how many drafts were accepted (their KV is valid
    and they are in ``seq.fed``)."""
    seq.fed.append(seq.pending)
    seq.pending = None
    if seq.job.cancelled.is_set():
        seq.finish = "abort"
        return 0
    seq.take(logits[0])
    accepted = 0
    while seq.finish is None and accepted < len(drafts) and seq.pending == drafts[accepted]:
        seq.fed.append(seq.pending)
        seq.pending = None
        accepted += 1
        seq.take(logits[accepted])
    return accepted


def plan_drafts(
    decoding: list[Sequence], config: SpeculativeConfig, context_length: int, room: int
) -> dict[int, list[int]]:
    """Drafts for this step, by decoding row: each request's proposal, within its limits,
    ``config.max_step_drafts`` and ``room`` (tokens left in the step) over all of them."""
    out: dict[int, list[int]] = {}
    if not config.enabled:
        return out
    cap = min(config.max_step_drafts, room)
    alone = len(decoding) == 1
    for row, seq in enumerate(decoding):
        if cap <= 0:
            break
        if seq.drafter is None:
            continue
        limit = min(seq.pacer.next_length(alone), cap)
        if limit <= 0:
            continue
        drafts = seq.drafter.propose(draft_limit(seq, context_length, limit))
        if drafts:
            out[row] = drafts
            cap -= len(drafts)
    return out
