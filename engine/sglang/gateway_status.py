"""What the model gateway (smg 1.13.0) and its workers say about themselves.

smg answers ``GET /readiness`` (200 while at least one worker is healthy, else 503) and
``GET /workers`` (``{"workers": [{"url", "is_healthy", "status", "load", ...}], ...}``); its own
Prometheus metrics are on their own port (``GatewayConfig.metrics_url``). A worker's queue, KV
usage and cache hit rate come from its own ``/metrics`` under SGLang's names. Every read here
has a short timeout and never raises: an unreachable gateway or worker is a state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from engine.sglang.metrics_scrape import contract_metrics, parse_metrics


@dataclass(frozen=True)
class WorkerState:
    """One worker as the gateway sees it, and its own metrics (empty when unreachable)."""

    url: str
    healthy: bool
    status: str  # smg's: "ready", "not_ready", "draining"; "unknown" when not listed
    load: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    error: str = ""


@dataclass(frozen=True)
class GatewayState:
    url: str
    reachable: bool
    ready: bool
    workers: tuple[WorkerState, ...] = ()
    metrics: dict[str, float] = field(default_factory=dict)  # smg_* samples, summed
    error: str = ""

    @property
    def healthy_workers(self) -> int:
        return sum(w.healthy for w in self.workers)


def parse_workers(body: Any) -> dict[str, WorkerState]:
    """smg's ``/workers`` answer, by worker URL."""
    rows = body.get("workers") if isinstance(body, dict) else None
    out: dict[str, WorkerState] = {}
    for row in rows or []:
        if not isinstance(row, dict) or not isinstance(row.get("url"), str):
            continue
        url = row["url"].rstrip("/")
        load = row.get("load")
        out[url] = WorkerState(
            url=url,
            healthy=bool(row.get("is_healthy")),
            status=str(row.get("status") or "unknown"),
            load=int(load) if isinstance(load, int | float) else 0,
        )
    return out


def read_gateway(
    base_url: str,
    worker_urls: tuple[str, ...] = (),
    metrics_url: str | None = None,
    timeout_s: float = 3.0,
) -> GatewayState:
    """The gateway's readiness and workers, each expected worker's own metrics, and (given
    ``metrics_url``) the gateway's metrics. ``worker_urls``: the workers it should have; one
    it does not list is reported as not healthy."""
    base = base_url.rstrip("/")
    with httpx.Client(timeout=timeout_s) as http:
        try:
            ready = http.get(f"{base}/readiness").status_code == 200
            listed = parse_workers(http.get(f"{base}/workers").json())
        except (httpx.HTTPError, ValueError) as exc:
            workers = tuple(
                _with_metrics(http, WorkerState(u, False, "unknown")) for u in worker_urls
            )
            return GatewayState(base, False, False, workers, error=f"gateway unreachable: {exc}")
        expected = [u.rstrip("/") for u in worker_urls] or list(listed)
        extra = [u for u in listed if u not in expected]
        workers = tuple(
            _with_metrics(http, listed.get(u) or WorkerState(u, False, "unknown"))
            for u in expected + extra
        )
        metrics: dict[str, float] = {}
        if metrics_url:
            try:
                metrics = parse_metrics(http.get(metrics_url).text, prefix="smg_")
            except (httpx.HTTPError, ValueError):
                metrics = {}
    return GatewayState(base, True, ready, workers, metrics)


def _with_metrics(http: httpx.Client, worker: WorkerState) -> WorkerState:
    try:
        response = http.get(f"{worker.url}/metrics")
        response.raise_for_status()
        metrics = contract_metrics(response.text)
    except (httpx.HTTPError, ValueError) as exc:
        return WorkerState(worker.url, worker.healthy, worker.status, worker.load, {}, str(exc))
    return WorkerState(worker.url, worker.healthy, worker.status, worker.load, metrics)
