"""How many draft tokens a step is worth, from what a step of each size costs on this CPU.

A draft is one more row of the step, computed in case the model agrees with the drafter.
Whether that pays depends on the CPU:
- With AVX-512 BF16, a decode step's linears are bound by reading the weights, which a step
  reads once for all its rows. 8 rows cost about what 1 does and 16 cost 1.14x 8, so drafts
  ride nearly free (SmolLM2-135M, 2 vCPUs of a Zen 4 VM).
- The float32 GEMV of a CPU with only AVX2 computes at the FMA rate: 16 rows took 1.9x the
  time of 8 on a 2-vCPU AVX2 EPYC. There, drafts for 8 open-ended streams made decoding 4-7%
  slower (0.57 of the drafts accepted, 1.16-1.31 tokens a step).

So a step runs the number of drafts ``d`` (up to what the drafters propose) that maximises its
expected tokens per second, ``(n + rate * d) / T(n + m + d)``. Here ``n`` is the decoding
rows, ``m`` the prompt rows the step carries, and ``T`` the measured time of the linears for a
step of that many rows (``StepCosts``: the times ``calibrate.gemv_wins`` took for steps of
1, 5, 8, 16 and 128 rows on the linears it chose, once per process).
``rate`` is the share of recent drafts accepted, as an exponentially decaying count. A step
carrying a prompt chunk is compute-bound, and a draft costs it 1/512 more; a decoding row that
rides in it gains a whole step's wait per accepted draft, so drafts stay on there.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StepCosts:
    """Seconds for the linears of a step of ``rows[i]`` rows: ``seconds[i]`` (rows
    increasing, seconds made non-decreasing: a step with more rows never costs less)."""

    rows: tuple[int, ...]
    seconds: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.rows) < 2 or len(self.rows) != len(self.seconds):
            raise ValueError("step costs: need at least two (rows, seconds) points")
        if any(b <= a for a, b in zip(self.rows, self.rows[1:], strict=False)):
            raise ValueError("step costs: rows must increase")
        running, level = [], 0.0
        for s in self.seconds:
            level = max(level, s)
            running.append(level)
        object.__setattr__(self, "seconds", tuple(running))

    def at(self, rows: int) -> float:
        """Seconds for a step of ``rows``: linear between the measured points, flat below the
        first, and on the last two points' slope past the last (compute-bound there)."""
        r, s = self.rows, self.seconds
        if rows <= r[0]:
            return s[0]
        for i in range(1, len(r)):
            if rows <= r[i]:
                return s[i - 1] + (s[i] - s[i - 1]) * (rows - r[i - 1]) / (r[i] - r[i - 1])
        slope = (s[-1] - s[-2]) / (r[-1] - r[-2])
        return s[-1] + slope * (rows - r[-1])


class DraftBudget:
    """The drafts a step is worth (``cap``), and the acceptance record it is judged by.

    The record is a decaying count of drafts verified and accepted, decayed at every step that
    decodes, plus a fixed prior. A workload whose drafts stop paying (a rate too low for the
    batch) thus stops drafting, and is tried again once its record has faded to the prior:
    steps without drafts would otherwise keep a stale rate for good."""

    PRIOR_RATE = 0.5  # with no record: a draft is worth half a token ...
    PRIOR_WEIGHT = 8.0  # ... counted as this many drafts
    DECAY = 0.98  # per decoding step: a record of about the last 50 steps

    def __init__(self, costs: StepCosts) -> None:
        self.costs = costs
        self.accepted = 0.0  # decayed counts, without the prior
        self.drafted = 0.0

    @property
    def rate(self) -> float:
        """The share of recent drafts accepted (the prior's where few were verified)."""
        prior = self.PRIOR_RATE * self.PRIOR_WEIGHT
        return (self.accepted + prior) / (self.drafted + self.PRIOR_WEIGHT)

    def record(self, drafted: int, accepted: int) -> None:
        """One decoding step's drafts, ``accepted`` of ``drafted`` (all requests together;
        0 of 0 for a step that ran none)."""
        self.accepted = self.DECAY * self.accepted + accepted
        self.drafted = self.DECAY * self.drafted + drafted

    def cap(self, decode_rows: int, prompt_rows: int, limit: int) -> int:
        """The number of drafts, at most ``limit``, that maximises the expected tokens per
        second of a step of ``decode_rows`` decoding rows and ``prompt_rows`` prompt rows
        (the fewest where several tie)."""
        if decode_rows <= 0 or limit <= 0:
            return 0
        rate, base = self.rate, decode_rows + prompt_rows
        best, best_value = 0, decode_rows / self.costs.at(base)
        for d in range(1, limit + 1):
            value = (decode_rows + rate * d) / self.costs.at(base + d)
            if value > best_value:
                best, best_value = d, value
        return best
