"""Prometheus ``/metrics`` under SGLang's metric names, each labelled ``model_name``.

Gauges and counters are read from ``engine.metrics()`` at scrape time by a custom collector;
``sglang:token_usage`` is used/max tokens and ``sglang:gen_throughput`` the rate of
``generation_tokens_total`` over the last scrapes (0 until there are two). The latency
histograms are observed by the server from each finished request's ``GenerationStats``.
Every app has its own registry: nothing is registered globally.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from engine.base import Engine, GenerationStats

LABELS = ("model_name",)

GAUGES = {
    "num_running_reqs": "Requests being decoded",
    "num_queue_reqs": "Requests waiting in the queue",
    "num_used_tokens": "Tokens held in the KV cache",
    "cache_hit_rate": "Prefix cache hit rate (cached / prompt tokens)",
    "max_total_num_tokens": "Capacity of the KV cache in tokens",
    "spec_accept_length": "Tokens a speculative verify step emits, on average since start",
    "spec_accept_rate": "Share of speculative draft tokens accepted since start",
}
COUNTERS = {
    "prompt_tokens_total": "Prompt tokens processed",
    "generation_tokens_total": "Tokens generated",
    "cached_tokens_total": "Prompt tokens served from the prefix cache",
    "num_requests_total": "Requests finished (including aborted ones)",
    "num_aborted_requests_total": "Requests aborted",
}
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300, 600)
ITL_BUCKETS = (0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2, 5)


class RateMeter:
    """Per-second rate of a monotonic total over a sliding window of observations."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, window_s: float = 60.0):
        self._clock = clock
        self._window_s = window_s
        self._samples: deque[tuple[float, float]] = deque()
        self._lock = threading.Lock()

    def rate(self, total: float) -> float:
        with self._lock:
            now = self._clock()
            self._samples.append((now, total))
            while len(self._samples) > 2 and now - self._samples[1][0] >= self._window_s:
                self._samples.popleft()
            then, before = self._samples[0]
        if now <= then:
            return 0.0
        return max(0.0, total - before) / (now - then)


class _EngineCollector(Collector):
    def __init__(self, engine: Engine, model_name: str) -> None:
        self._engine = engine
        self._model = model_name
        self._throughput = RateMeter()

    def throughput(self) -> float:
        return self._throughput.rate(self._engine.metrics().get("generation_tokens_total", 0.0))

    def collect(self) -> Iterator[Metric]:
        m = self._engine.metrics()
        label = [self._model]
        for name, doc in GAUGES.items():
            yield _gauge(name, doc, label, m.get(name, 0.0))
        used, total = m.get("num_used_tokens", 0.0), m.get("max_total_num_tokens", 0.0)
        usage = used / total if total else 0.0
        yield _gauge("token_usage", "KV cache fill (used / max tokens)", label, usage)
        rate = self._throughput.rate(m.get("generation_tokens_total", 0.0))
        yield _gauge("gen_throughput", "Generation throughput (tokens/s)", label, rate)
        for name, doc in COUNTERS.items():
            # the family's name has no ``_total``: the exposition appends it exactly once
            base = f"sglang:{name.removesuffix('_total')}"
            family = CounterMetricFamily(base, doc, labels=LABELS)
            family.add_metric(label, m.get(name, 0.0))
            yield family


def _gauge(name: str, doc: str, label: list[str], value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(f"sglang:{name}", doc, labels=LABELS)
    family.add_metric(label, float(value))
    return family


class ServerMetrics:
    """One app's registry: the engine collector plus the request-latency histograms."""

    def __init__(self, engine: Engine, model_name: str) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._collector = _EngineCollector(engine, model_name)
        self.registry.register(self._collector)

        def histogram(name: str, doc: str, buckets: tuple[float, ...]):  # noqa: ANN202
            h = Histogram(name, doc, LABELS, registry=self.registry, buckets=buckets)
            return h.labels(model_name=model_name)  # the series exists before any request

        self._ttft = histogram(
            "sglang:time_to_first_token_seconds", "Time to first token", LATENCY_BUCKETS
        )
        self._itl = histogram(
            "sglang:inter_token_latency_seconds", "Time between output tokens", ITL_BUCKETS
        )
        self._e2e = histogram(
            "sglang:e2e_request_latency_seconds", "Request latency", LATENCY_BUCKETS
        )
        self._queue = histogram(
            "sglang:queue_time_seconds", "Time spent waiting in the queue", LATENCY_BUCKETS
        )

    def observe(self, stats: GenerationStats) -> None:
        self._queue.observe(max(0.0, stats.queue_s))
        self._e2e.observe(max(0.0, stats.e2e_s))
        if stats.completion_tokens >= 1:
            self._ttft.observe(max(0.0, stats.ttft_s))
        if stats.completion_tokens >= 2:
            # one observation per gap between output tokens, each the request's mean gap
            gap = max(0.0, stats.e2e_s - stats.ttft_s) / (stats.completion_tokens - 1)
            for _ in range(stats.completion_tokens - 1):
                self._itl.observe(gap)

    def gen_throughput(self) -> float:
        return self._collector.throughput()

    def render(self) -> bytes:
        return generate_latest(self.registry)
