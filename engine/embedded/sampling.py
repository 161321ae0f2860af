"""Choosing the next token from logits: greedy, or temperature + top-p with a seeded generator."""

from __future__ import annotations

import torch


def make_generator(seed: int | None) -> torch.Generator | None:
    if seed is None:
        return None
    gen = torch.Generator()
    gen.manual_seed(seed)
    return gen


def sample_next(
    logits: torch.Tensor,
    temperature: float,
    top_p: float,
    generator: torch.Generator | None = None,
) -> int:
    """``logits`` is 1-D over the vocabulary."""
    if temperature <= 0.0:
        return int(torch.argmax(logits).item())
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        cumulative = torch.cumsum(sorted_probs, dim=-1)
        # drop tokens once the mass before them already reaches top_p (always keep the first)
        drop = cumulative - sorted_probs >= top_p
        sorted_probs[drop] = 0.0
        probs = torch.zeros_like(probs).scatter_(0, order, sorted_probs)
        probs = probs / probs.sum()
    return int(torch.multinomial(probs, 1, generator=generator).item())
