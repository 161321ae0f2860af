"""The plan of a one-box cluster: N ``engine-server`` workers on loopback ports with the CPU
threads split between them, and the model gateway (smg, cache-aware routing) in front.
Pure: ports, command lines and environments; ``cluster.py`` runs it.

With ``remote`` worker URLs (the multi-node profile) no local worker is planned: the gateway
fronts those workers.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.sglang.gateway import GatewayConfig, gateway_for

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class WorkerSpec:
    name: str
    port: int
    threads: int
    argv: tuple[str, ...]
    env: dict[str, str]

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"


@dataclass(frozen=True)
class ClusterPlan:
    workers: tuple[WorkerSpec, ...]  # local workers (none for remote ones)
    gateway: GatewayConfig

    @property
    def worker_urls(self) -> tuple[str, ...]:
        return self.gateway.worker_urls


def plan_cluster(
    *,
    workers: int,
    model_dir: Path,
    served_model_name: str,
    cpus: int,
    base_port: int = 0,
    gateway_port: int = 30000,
    config_path: Path | None = None,
    policy: str = "cache_aware",
    remote: tuple[str, ...] = (),
    python: str = sys.executable,
    worker_ports: tuple[int, ...] = (),
    metrics_port: int = 0,
    worker_env: Mapping[str, str] | None = None,
) -> ClusterPlan:
    """``workers`` local workers on ``base_port``, ``base_port + 1``, ... (0: from the port
    after the gateway's; a port the gateway or its metrics hold is skipped) (or on
    ``worker_ports``) sharing ``cpus`` threads (at least one each), or none with ``remote``
    URLs; the gateway on ``gateway_port``, its metrics on ``metrics_port`` (0: the next
    port). ``worker_env`` adds settings to every local worker (e.g. its KV budget)."""
    if remote:
        local: tuple[WorkerSpec, ...] = ()
        urls = remote
    else:
        if workers < 1:
            raise ValueError("a cluster needs at least one worker")
        taken = {gateway_port, metrics_port or gateway_port + 1}
        base_port = base_port or gateway_port + 1
        ports = (
            list(worker_ports)
            or [p for p in range(base_port, base_port + workers + 2) if p not in taken][:workers]
        )
        if len(ports) != workers or taken & set(ports):
            raise ValueError(f"{workers} worker ports are needed, apart from the gateway's")
        threads = max(1, cpus // workers)
        local = tuple(
            _worker(i, port, threads, model_dir, served_model_name, config_path, python, worker_env)
            for i, port in enumerate(ports)
        )
        urls = tuple(w.url for w in local)
    gateway = gateway_for(urls, host=LOOPBACK, port=gateway_port, policy=policy, python=python)
    return ClusterPlan(local, gateway)


def _worker(
    index: int,
    port: int,
    threads: int,
    model_dir: Path,
    served_model_name: str,
    config_path: Path | None,
    python: str,
    extra_env: Mapping[str, str] | None = None,
) -> WorkerSpec:
    config = ("--config", str(config_path)) if config_path else ()
    argv = (
        python, "-m", "appliance.cli", *config, "engine-server",
        "--host", LOOPBACK, "--port", str(port), "--served-model-name", served_model_name,
    )  # fmt: skip
    env = {
        **(extra_env or {}),
        # every worker runs the embedded engine on its share of the cores, whatever the
        # app's own engine settings say
        "APPLIANCE_ENGINE__BACKEND": "embedded",
        "APPLIANCE_ENGINE__THREADS": str(threads),
        "APPLIANCE_ENGINE__MODEL_PATH": str(model_dir),
        "OMP_NUM_THREADS": str(threads),
    }
    return WorkerSpec(f"worker-{index}", port, threads, argv, env)
