"""Live chart data as long-format DataFrames (time, value, series) for ``gr.LinePlot`` (pure)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from appliance.core.services.admin.series import EngineSample

COLUMNS = ("time", "value", "series")
# every chart's series and their colours
ENGINE_HIT, TURN_HIT = "engine, cumulative", "per turn, last 20"
SERIES = {
    "hit": {ENGINE_HIT: "#4c78a8", TURN_HIT: "#f58518"},
    "ttft": {"p50": "#4c78a8", "p95": "#e45756"},
    "throughput": {"generated tokens/s": "#54a24b"},
    "queue": {"waiting": "#e45756", "running": "#4c78a8"},
    "kv": {"KV used %": "#b279a2"},
    "verified": {"supported sentences %": "#54a24b"},
}


def frame(points: list[tuple], key: str | None = None) -> pd.DataFrame:
    """The points as a frame. With ``key``, every series of that chart also gets one empty
    row (no time, no value: not drawn), because the browser's plot keeps the series it saw
    when first drawn, and a series that starts later (the first turn's TTFT) would stay
    invisible."""
    if key is not None:
        points = [*points, *((None, None, name) for name in SERIES[key])]
    df = pd.DataFrame(points, columns=list(COLUMNS))
    df["time"] = pd.to_datetime(df["time"], utc=True)
    df["value"] = pd.to_numeric(df["value"])
    return df


def hit_rate_frame(samples: Sequence[EngineSample], turns: Sequence[dict]) -> pd.DataFrame:
    points = [(s.at, 100 * s.hit_rate, ENGINE_HIT) for s in samples]
    points += [(t["time"], 100 * t["turn_hit_rate"], TURN_HIT) for t in turns]
    return frame(points, "hit")


def ttft_frame(turns: Sequence[dict]) -> pd.DataFrame:
    points = [(t["time"], t["ttft_p50_ms"], "p50") for t in turns]
    points += [(t["time"], t["ttft_p95_ms"], "p95") for t in turns]
    return frame(points, "ttft")


def throughput_frame(samples: Sequence[EngineSample]) -> pd.DataFrame:
    return frame([(s.at, s.throughput_tps, "generated tokens/s") for s in samples], "throughput")


def queue_frame(samples: Sequence[EngineSample]) -> pd.DataFrame:
    points = [(s.at, s.queue, "waiting") for s in samples]
    points += [(s.at, s.running, "running") for s in samples]
    return frame(points, "queue")


def kv_frame(samples: Sequence[EngineSample]) -> pd.DataFrame:
    return frame([(s.at, 100 * s.kv_usage, "KV used %") for s in samples], "kv")


def verified_frame(turns: Sequence[dict]) -> pd.DataFrame:
    """The share of checked answer sentences the sources support, last 20 answers."""
    points = [
        (t["time"], 100 * t["verified_share"], "supported sentences %")
        for t in turns
        if t.get("verified_share") is not None
    ]
    return frame(points, "verified")
