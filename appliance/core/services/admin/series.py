"""Pure helpers for the live charts: percentiles and per-turn rolling statistics."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass(frozen=True)
class Turn:
    """One stored answer's metrics (from ``messages``)."""

    at: datetime
    ttft_ms: float
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    e2e_ms: float
    # checked answer sentences (0 and 0 for answers stored before answers were checked)
    claims_total: int = 0
    claims_supported: int = 0
    # the cached tokens the cache shadow predicted before the turn was sent (None: not recorded)
    predicted_cached: int | None = None


def rolling_turn_stats(turns: Sequence[Turn], window: int = 20) -> list[dict]:
    """Per turn, oldest first: TTFT p50/p95 and the cache hit rate over the last ``window``
    turns up to and including it (so every point is backed by real turns), and the share of
    their checked sentences that the sources support (None while none was checked), and how
    far the cache shadow's predictions were from the engine's reports: the sum of
    |predicted - reported cached tokens| over their prompt tokens (None while none was
    predicted)."""
    out = []
    for i, turn in enumerate(turns):
        recent = turns[max(0, i - window + 1) : i + 1]
        ttfts = [t.ttft_ms for t in recent]
        prompt = sum(t.prompt_tokens for t in recent)
        cached = sum(t.cached_tokens for t in recent)
        claims = sum(t.claims_total for t in recent)
        predicted = [t for t in recent if t.predicted_cached is not None]
        predicted_prompt = sum(t.prompt_tokens for t in predicted)
        out.append(
            {
                "time": turn.at,
                "ttft_p50_ms": percentile(ttfts, 50),
                "ttft_p95_ms": percentile(ttfts, 95),
                "turn_hit_rate": cached / prompt if prompt else 0.0,
                "verified_share": (
                    sum(t.claims_supported for t in recent) / claims if claims else None
                ),
                "shadow_error": (
                    sum(abs((t.predicted_cached or 0) - t.cached_tokens) for t in predicted)
                    / predicted_prompt
                    if predicted_prompt
                    else None
                ),
            }
        )
    return out


@dataclass(frozen=True)
class EngineSample:
    """One reading of the engine's metrics."""

    at: datetime
    hit_rate: float  # the engine's cumulative prefix cache hit rate
    throughput_tps: float  # generated tokens per second since the previous sample
    queue: float
    running: float
    kv_usage: float  # used / capacity, 0..1


def engine_sample(
    at: datetime, metrics: dict[str, float], previous: tuple[float, float] | None
) -> tuple[EngineSample, tuple[float, float]]:
    """Turn ``Engine.metrics()`` into a sample; ``previous`` is (monotonic time, generated
    tokens) of the last sample, for the throughput. Returns the sample and the new previous."""
    now = at.timestamp()
    generated = metrics.get("generation_tokens_total", 0.0)
    rate = 0.0
    if previous is not None and now > previous[0]:
        rate = max(0.0, generated - previous[1]) / (now - previous[0])
    capacity = metrics.get("max_total_num_tokens", 0.0)
    usage = metrics.get("num_used_tokens", 0.0) / capacity if capacity else 0.0
    if not capacity and metrics.get("token_usage"):
        usage = metrics["token_usage"]
    prompt = metrics.get("prompt_tokens_total", 0.0)
    hit = metrics.get("cache_hit_rate", 0.0)
    if not hit and prompt:
        hit = metrics.get("cached_tokens_total", 0.0) / prompt
    sample = EngineSample(
        at=at,
        hit_rate=hit,
        throughput_tps=rate,
        queue=metrics.get("num_queue_reqs", 0.0),
        running=metrics.get("num_running_reqs", 0.0),
        kv_usage=usage,
    )
    return sample, (now, generated)
