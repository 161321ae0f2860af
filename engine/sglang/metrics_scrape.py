"""Prometheus text from SGLang's ``/metrics`` as plain numbers under the engine contract's keys.

``parse_metrics`` keys every sample by its own name without the ``sglang:`` prefix, summed over
label sets (one SGLang server may label per ``model_name``, ``tp_rank``...). It walks samples,
not families: ``prometheus_client``'s parser names a counter's family without ``_total``, but
its samples keep it, so counters come out as ``prompt_tokens_total``. Histograms give
``<name>_sum`` and ``<name>_count`` (buckets and ``_created`` timestamps are dropped), so a caller
can compute means, e.g. ``time_to_first_token_seconds_sum / time_to_first_token_seconds_count``.

``cached_by_source`` reads ``sglang:cached_tokens_total`` per its ``cache_source`` label
(``device``, ``host``, ``storage``; ``total`` when a request carried no breakdown): sglang 0.5.23
``srt/observability/metrics_collector.py`` ``observe_one_finished_request``. ``contract_metrics``
adds them as ``cached_tokens_<source>_total`` when SGLang labels them.

``contract_metrics`` adds every key ``engine.base.Engine.metrics`` promises, 0.0 where this
SGLang version does not export it; ``cache_hit_rate`` then falls back to cached / prompt tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

PREFIX = "sglang:"
COUNTER_KEYS = (
    "prompt_tokens_total",
    "cached_tokens_total",
    "generation_tokens_total",
    "num_requests_total",
    "num_aborted_requests_total",
)
GAUGE_KEYS = (
    "num_running_reqs",
    "num_queue_reqs",
    "num_used_tokens",
    "max_total_num_tokens",
    "cache_hit_rate",
    "token_usage",
    "gen_throughput",
    # speculative decoding (0.0 where it is off or this SGLang version does not export them)
    "spec_accept_length",
    "spec_accept_rate",
)
CONTRACT_KEYS = COUNTER_KEYS + GAUGE_KEYS
_DROPPED_SUFFIXES = ("_bucket", "_created", "_gsum", "_gcount")


def parse_metrics(text: str, prefix: str = PREFIX) -> dict[str, float]:
    """Every ``prefix``-named sample in ``text``, prefix removed, summed over label sets."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name
            if not name.startswith(prefix) or name.endswith(_DROPPED_SUFFIXES):
                continue
            key = name.removeprefix(prefix)
            out[key] = out.get(key, 0.0) + float(sample.value)
    return out


CACHE_SOURCES = ("device", "host", "storage")


@dataclass(frozen=True)
class CachedBySource:
    """Prompt tokens served from each cache tier since the engine started: GPU (``device``),
    HiCache host RAM (``host``), HiCache storage (``storage``), and ``unlabelled`` (requests
    SGLang reported without a breakdown, ``cache_source="total"``)."""

    device: float = 0.0
    host: float = 0.0
    storage: float = 0.0
    unlabelled: float = 0.0


def cached_by_source(text: str, prefix: str = PREFIX) -> CachedBySource | None:
    """``sglang:cached_tokens_total`` summed per ``cache_source``; None when no sample has
    that label (an older SGLang, or the embedded engine)."""
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            source = sample.labels.get("cache_source")
            if sample.name == f"{prefix}cached_tokens_total" and source is not None:
                sums[source] = sums.get(source, 0.0) + float(sample.value)
    if not sums:
        return None
    known = {k: sums.get(k, 0.0) for k in CACHE_SOURCES}
    return CachedBySource(**known, unlabelled=sums.get("total", 0.0))


def contract_metrics(text: str) -> dict[str, float]:
    """``parse_metrics`` plus every contract key (0.0 when absent), and the cached tokens by
    source (``cached_tokens_device_total``...) when SGLang labels them."""
    parsed = parse_metrics(text)
    out = {key: 0.0 for key in CONTRACT_KEYS} | parsed
    sources = cached_by_source(text)
    if sources is not None:
        out |= {f"cached_tokens_{k}_total": getattr(sources, k) for k in CACHE_SOURCES}
    if "cache_hit_rate" not in parsed and out["prompt_tokens_total"]:
        out["cache_hit_rate"] = out["cached_tokens_total"] / out["prompt_tokens_total"]
    return out
