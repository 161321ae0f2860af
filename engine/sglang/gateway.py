"""Multi-node: the SGLang model gateway (PyPI ``smg``, formerly ``sglang-router``).

smg's Python package installs the ``smg`` console script (``smg.cli:main``) and ``python -m smg``;
its ``launch`` subcommand starts the router alone in front of existing workers::

    python -m smg launch --host H --port P --worker-urls URL [URL ...] --policy cache_aware \
        --cache-threshold 0.3 --balance-abs-threshold 64 --balance-rel-threshold 1.5

(flag names as defined in smg's ``bindings/python/src/smg/router_args.py``; the older
``python -m sglang_router.launch_router`` entry belongs to the pre-rename package). The appliance
uses ``python -m smg launch`` so the unit needs no console script on ``PATH``. The router
renames its process ``smg::router``.

Health checks, retries and the metrics listener are set here, not left at smg 1.13.0's
defaults (seen on this machine): its default health check runs every 60 s and needs 3
failures, so a dead worker stayed "healthy" for 178 s, and a restarted one took 120 s to
rejoin; its Prometheus listener binds 0.0.0.0. Here a worker is marked down after two failed
checks 3 s apart, back up after one good check, a request is retried twice on another worker,
a worker not up at start is looked for every 2 s, and metrics listen on loopback.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

METRICS_PORT_OFFSET = 1  # the gateway's metrics listen on its own port + this, unless set
# smg 1.13.0 names the worker that served a request in this answer header (its URL; on
# /generate, /v1/chat/completions and /v1/completions, streamed or not: seen on this machine)
ROUTED_WORKER_HEADER = "x-smg-routed-worker-id"


@dataclass(frozen=True)
class GatewayConfig:
    """Workers and cache-aware routing knobs (defaults are smg's documented defaults)."""

    worker_urls: tuple[str, ...]
    host: str = "127.0.0.1"
    port: int = 30080
    policy: str = "cache_aware"
    cache_threshold: float = 0.3
    balance_abs_threshold: int = 64
    balance_rel_threshold: float = 1.5
    python: str = "python"
    health_check_interval_s: int = 3
    health_check_timeout_s: int = 2
    health_failure_threshold: int = 2
    health_success_threshold: int = 1
    retry_max_retries: int = 2
    worker_startup_check_interval_s: int = 2
    worker_startup_timeout_s: int = 1800
    request_timeout_s: int = 1800
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 0  # 0: the gateway's port + 1
    log_level: str = "warn"

    def __post_init__(self) -> None:
        if not self.worker_urls:
            raise ValueError("the gateway needs at least one worker URL")
        for url in self.worker_urls:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https", "grpc") or not parts.netloc:
                raise ValueError(f"bad worker URL {url!r}: expected http://host:port")
        if len(set(self.worker_urls)) != len(self.worker_urls):
            raise ValueError("duplicate worker URL")

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def metrics_url(self) -> str:
        """The gateway's own Prometheus metrics."""
        return f"http://{self.metrics_host}:{self.listen_metrics_port}/metrics"

    @property
    def listen_metrics_port(self) -> int:
        return self.metrics_port or self.port + METRICS_PORT_OFFSET

    def argv(self) -> tuple[str, ...]:
        """The gateway command line."""
        return (
            self.python,
            "-m",
            "smg",
            "launch",
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--worker-urls",
            *self.worker_urls,
            "--policy",
            self.policy,
            "--cache-threshold",
            f"{self.cache_threshold:g}",
            "--balance-abs-threshold",
            str(self.balance_abs_threshold),
            "--balance-rel-threshold",
            f"{self.balance_rel_threshold:g}",
            "--health-check-interval-secs",
            str(self.health_check_interval_s),
            "--health-check-timeout-secs",
            str(self.health_check_timeout_s),
            "--health-failure-threshold",
            str(self.health_failure_threshold),
            "--health-success-threshold",
            str(self.health_success_threshold),
            "--retry-max-retries",
            str(self.retry_max_retries),
            "--worker-startup-check-interval",
            str(self.worker_startup_check_interval_s),
            "--worker-startup-timeout-secs",
            str(self.worker_startup_timeout_s),
            "--request-timeout-secs",
            str(self.request_timeout_s),
            "--prometheus-host",
            self.metrics_host,
            "--prometheus-port",
            str(self.listen_metrics_port),
            "--log-level",
            self.log_level,
        )

    def command(self) -> str:
        """The shell-quoted command line."""
        return shlex.join(self.argv())


def gateway_for(worker_urls: list[str] | tuple[str, ...], **overrides: Any) -> GatewayConfig:
    """A gateway config over these workers, trailing slashes stripped."""
    urls = tuple(u.rstrip("/") for u in worker_urls)
    return GatewayConfig(worker_urls=urls, **overrides)


def default_metrics_url(base_url: str) -> str:
    """Where a gateway at ``base_url`` started with the default metrics port (its own + 1)
    serves its Prometheus metrics."""
    parts = urlsplit(base_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"http://{parts.hostname or '127.0.0.1'}:{port + METRICS_PORT_OFFSET}/metrics"
