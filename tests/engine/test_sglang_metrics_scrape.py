"""Cached tokens by source from SGLang's ``/metrics``: the sample text is made by
prometheus_client from the counter exactly as sglang 0.5.23 defines and feeds it
(``srt/observability/metrics_collector.py``: ``sglang:cached_tokens_total``, label names
``model_name`` + ``cache_source``, incremented per finished request by source)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from engine.sglang.metrics_scrape import CachedBySource, cached_by_source, contract_metrics


def _sglang_text(details: list[dict[str, int] | None], cached: list[int]) -> str:
    """What SGLang's collector renders after these finished requests (its own logic: a source is
    counted when > 0; a request without a breakdown counts under ``total``)."""
    registry = CollectorRegistry()
    labels = {"model_name": "llama-8b"}
    counter = Counter(
        name="sglang:cached_tokens_total",
        documentation="Number of cached prompt tokens by source (device/host/storage).",
        labelnames=[*labels, "cache_source"],
        registry=registry,
    )
    Gauge("sglang:hicache_host_used_tokens", "host", [*labels], registry=registry).labels(
        **labels
    ).set(4096)
    for detail, tokens in zip(details, cached, strict=True):
        if tokens <= 0:
            continue
        if detail:
            for source in ("device", "host", "storage"):
                if detail.get(source, 0) > 0:
                    counter.labels(**labels, cache_source=source).inc(detail[source])
        else:
            counter.labels(**labels, cache_source="total").inc(tokens)
    return generate_latest(registry).decode()


def test_cached_tokens_by_source() -> None:
    text = _sglang_text([{"device": 3000, "host": 1000}, {"device": 64, "host": 0}], [4000, 64])
    assert 'cache_source="device"' in text and 'cache_source="host"' in text
    assert cached_by_source(text) == CachedBySource(device=3064, host=1000)
    m = contract_metrics(text)
    assert m["cached_tokens_total"] == 4064  # summed over sources, as before
    assert m["cached_tokens_device_total"] == 3064 and m["cached_tokens_host_total"] == 1000
    assert m["hicache_host_used_tokens"] == 4096


def test_unlabelled_and_absent() -> None:
    text = _sglang_text([None], [512])
    assert cached_by_source(text) == CachedBySource(unlabelled=512)
    # no request cached anything yet: no sample, no breakdown (the UI shows nothing)
    empty = _sglang_text([], [])
    assert cached_by_source(empty) is None
    assert "cached_tokens_device_total" not in contract_metrics(empty)
