"""What a tuned box runs (typed results, no logic beyond sums): one ``LaunchPlan`` per SGLang
worker, and the ``BoxPlan`` holding them all.

A box whose model fits on fewer GPUs than it has runs one worker per GPU group, each pinned to
its group with ``CUDA_VISIBLE_DEVICES`` (indices in PCI bus order, as ``nvidia-smi`` numbers
them: hence ``CUDA_DEVICE_ORDER=PCI_BUS_ID``), on its own port, behind the model gateway.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass


class DoesNotFit(ValueError):
    """The model's weights do not fit on all the box's GPUs together."""


@dataclass(frozen=True)
class SiteNeeds:
    """What the site expects: the context window, concurrent sessions, host RAM."""

    context_length: int
    concurrency: int
    host_ram_gb: float
    avg_tokens_per_request: int = 4096  # RAG: system + documents + turns + question


@dataclass(frozen=True)
class LaunchPlan:
    """One tuned SGLang worker; ``argv`` may be replaced (``dataclasses.replace``) for tests.
    ``gpu_ids`` is its GPU group when the box is split between workers (empty: every GPU)."""

    argv: tuple[str, ...]
    profile: str
    tp: int
    mem_fraction_static: float
    kv_capacity_tokens: int
    kv_bytes_per_token: int
    weights_bytes: int
    max_running_requests: int
    chunked_prefill_size: int
    context_length: int
    hicache_ratio: float | None
    served_model_name: str
    host: str = "127.0.0.1"
    port: int = 30000
    warnings: tuple[str, ...] = ()
    gpu_ids: tuple[int, ...] = ()
    hicache_size_gb: int = 0  # host KV pool per TP rank (``--hicache-size``); 0: HiCache off
    page_size: int = 1  # tokens per KV page (``--page-size``; 64 with HiCache)
    speculative: str = ""  # "" or "ngram" (``--speculative-algorithm NGRAM``)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def environment(self) -> Mapping[str, str]:
        """The variables that pin this worker to its GPU group (none for a whole box)."""
        if not self.gpu_ids:
            return {}
        devices = ",".join(str(i) for i in self.gpu_ids)
        return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": devices}

    def command(self) -> str:
        """The shell-quoted command line, led by its environment when it has one."""
        env = [f"{k}={shlex.quote(v)}" for k, v in sorted(self.environment.items())]
        return " ".join([*env, shlex.join(self.argv)])

    def capacity(self, context_length: int) -> int:
        """Sessions that can each hold ``context_length`` tokens in the GPU KV pool at once."""
        if context_length <= 0:
            raise ValueError("context_length must be positive")
        return self.kv_capacity_tokens // context_length


@dataclass(frozen=True)
class BoxPlan:
    """Every SGLang worker one box runs. More than one worker means a gateway in front of them
    (cache-aware routing); ``idle_gpus`` are GPUs no group could use (warned about)."""

    workers: tuple[LaunchPlan, ...]
    warnings: tuple[str, ...] = ()
    idle_gpus: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not self.workers:
            raise ValueError("a box plan needs at least one worker")

    @property
    def first(self) -> LaunchPlan:
        """The first worker (every worker has the same knobs; only ports and GPUs differ)."""
        return self.workers[0]

    @property
    def needs_gateway(self) -> bool:
        return len(self.workers) > 1

    @property
    def worker_urls(self) -> tuple[str, ...]:
        return tuple(w.base_url for w in self.workers)

    @property
    def kv_capacity_tokens(self) -> int:
        """KV tokens over all workers (each worker caches on its own)."""
        return sum(w.kv_capacity_tokens for w in self.workers)

    @property
    def max_running_requests(self) -> int:
        return sum(w.max_running_requests for w in self.workers)

    def capacity(self, context_length: int) -> int:
        """Sessions of ``context_length`` tokens the box holds at once, over all workers."""
        return sum(w.capacity(context_length) for w in self.workers)

    def commands(self) -> list[str]:
        """Each worker's shell-quoted command line."""
        return [w.command() for w in self.workers]
