"""How many prompt tokens a step carries while other requests decode, from this CPU's speed.

A step that carries a piece of a prompt makes every decoding request wait for it: the piece
bounds the pause in their streams. Smaller pieces pause them less, but a prompt then takes
more steps, and every step also reads each decoding request's KV and runs the per-step work
once more. A fixed 512 tokens suited a 2-vCPU Zen 4, where 512 prompt tokens take about
0.25 s. On a 2-vCPU Xeon with AMX tiles they take about 0.08 s, and 8 distinct 1,550-token
requests (64 new tokens each) took 4.04 s in 512-token pieces, 3.53 s in 1,536-token ones and
3.41 s in 2,048-token ones (medians of 3 rounds taking turns in one engine). So the piece is
what the linears of this CPU compute in ``STEP_TARGET_S`` (timed when the engine loads,
``calibrate.linear_costs``), in whole multiples of 256 tokens between 512 and 2,048 (vLLM's
CPU server takes 2,048 a step).
"""

from __future__ import annotations

from engine.embedded.draft_budget import StepCosts

DEFAULT = 512  # without timings, and the least a step carries
MOST = 2048  # the most: a step with no request decoding carries this much too
GRAIN = 256
STEP_TARGET_S = 0.30  # the pause a prompt piece may cause decoding streams (its linears' time)
PROMPT_ROWS = 128  # the step size whose timed cost per row stands for a prompt's


def prefill_chunk(costs: StepCosts | None) -> int:
    """Prompt tokens per step while others decode: what this CPU's linears run in
    ``STEP_TARGET_S``, at ``costs.at(PROMPT_ROWS) / PROMPT_ROWS`` seconds a row (the
    multiplies of a prompt are compute-bound from about that size on), rounded down to
    ``GRAIN`` and kept within ``DEFAULT`` .. ``MOST``; ``DEFAULT`` without timings."""
    if costs is None:
        return DEFAULT
    per_row = costs.at(PROMPT_ROWS) / PROMPT_ROWS
    if per_row <= 0:
        return MOST
    fits = int(STEP_TARGET_S / per_row) // GRAIN * GRAIN
    return max(DEFAULT, min(MOST, fits))
