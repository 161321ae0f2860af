"""Pure launch tuning: GPUs + model shape + site needs -> an SGLang command line.

Formulas (all memory in bytes; GiB = 2**30):

* reserve per GPU = activations + CUDA graphs + headroom, where activations =
  3 GiB x chunked_prefill / 8192, CUDA graphs = 2 GiB, headroom = the profile's 5-8 GiB kept
  free at start-up for long multi-turn contexts.
* ``--mem-fraction-static`` = clamp(1 - reserve / per_gpu_memory, profile band), floored to
  3 decimals. H100 80GB: 1 - 11/79.65 = 0.861 (band 0.85-0.88); H200: 1 - 13/140.4 = 0.907
  -> 0.90 (band 0.88-0.90); L40S 48GB: 1 - 8.5/45 = 0.811 (band 0.78-0.85).
* KV capacity tokens = (fraction x tp x per_gpu_memory - weights) / kv_bytes_per_token.
* ``--tp`` = the smallest power of two (else every GPU of the box) whose capacity covers the
  site's KV budget = concurrency x min(avg tokens per request, context length) tokens, and at
  least one full context.
* ``--max-running-requests`` = min(256, capacity / avg tokens per request), at least 1.
* ``--chunked-prefill-size`` = the profile's (8192 on 80 GB+ Hopper/A100, 4096 on 48 GB), or
  2048 when the KV budget is tight (capacity < 1.25 x the site's budget).
* HiCache (host-RAM second tier) when half the host RAM holds >= 2x the GPU KV pool:
  ``--enable-hierarchical-cache --hicache-ratio R``, R = min(4, usable / pool) floored to 0.5.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass

from engine.sglang.gpu_info import GIB, GpuInfo, GpuProfile, match_profile
from engine.sglang.model_shape import ModelShape

CUDA_GRAPH_GIB = 2.0
ACTIVATION_GIB_PER_8K = 3.0
MAX_RUNNING_CAP = 256
TIGHT_SLACK = 1.25
HICACHE_MIN_RATIO = 2.0
HICACHE_MAX_RATIO = 4.0


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
    """A tuned SGLang launch; ``argv`` may be replaced (``dataclasses.replace``) for tests."""

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

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def command(self) -> str:
        """The shell-quoted command line."""
        return shlex.join(self.argv)

    def capacity(self, context_length: int) -> int:
        """Sessions that can each hold ``context_length`` tokens in the GPU KV pool at once."""
        if context_length <= 0:
            raise ValueError("context_length must be positive")
        return self.kv_capacity_tokens // context_length


def fraction_for(profile: GpuProfile, per_gpu_bytes: int, chunked_prefill: int) -> float:
    """``--mem-fraction-static`` for one GPU (see the module docstring)."""
    activations = ACTIVATION_GIB_PER_8K * chunked_prefill / 8192
    reserve = (activations + CUDA_GRAPH_GIB + profile.headroom_gib) * GIB
    raw = 1.0 - reserve / per_gpu_bytes
    low, high = profile.fraction_band
    return math.floor(min(max(raw, low), high) * 1000) / 1000


def kv_capacity(fraction: float, tp: int, per_gpu_bytes: int, shape: ModelShape) -> int:
    """Tokens the KV pool holds: (fraction x tp x per-GPU memory - weights) / KV bytes."""
    pool = fraction * tp * per_gpu_bytes - shape.weights_bytes
    return max(0, int(pool // shape.kv_bytes_per_token))


def tp_candidates(n_gpus: int) -> list[int]:
    """Powers of two up to the GPU count, then the GPU count itself if it is not one."""
    sizes = [1 << i for i in range(n_gpus.bit_length()) if (1 << i) <= n_gpus]
    if sizes[-1] != n_gpus:
        sizes.append(n_gpus)
    return sizes


def hicache_ratio_for(host_ram_gb: float, pool_bytes: float) -> float | None:
    """Host:device KV ratio when half the host RAM holds >= 2x the GPU pool; else None."""
    if pool_bytes <= 0:
        return None
    usable = host_ram_gb * 1e9 / 2
    ratio = min(HICACHE_MAX_RATIO, math.floor(usable / pool_bytes * 2) / 2)
    return ratio if ratio >= HICACHE_MIN_RATIO else None


def tune(
    gpus: list[GpuInfo] | tuple[GpuInfo, ...],
    shape: ModelShape,
    site: SiteNeeds,
    *,
    model_path: str,
    served_model_name: str | None = None,
    host: str = "127.0.0.1",
    port: int = 30000,
    python: str = "python",
) -> LaunchPlan:
    """Choose the SGLang launch arguments for this box, model and site."""
    if not gpus:
        raise ValueError("no GPUs: SGLang needs CUDA; use the embedded CPU engine")
    profile = match_profile(gpus[0].name)
    per_gpu = min(g.memory_total_bytes for g in gpus)
    warnings = [
        f"GPU {g.index} already has {g.memory_used_mib} MiB in use"
        for g in gpus
        if g.memory_used_mib > 1024
    ]
    context = min(site.context_length, shape.max_position_embeddings)
    if context < site.context_length:
        warnings.append(f"context length capped at the model's {context} tokens")
    avg = max(1, min(site.avg_tokens_per_request, context))
    budget_tokens = max(context, site.concurrency * avg)
    fraction = fraction_for(profile, per_gpu, profile.chunked_prefill)

    tp, capacity = 0, 0
    for size in tp_candidates(len(gpus)):
        tp, capacity = size, kv_capacity(fraction, size, per_gpu, shape)
        if capacity >= budget_tokens:
            break
    if capacity < context:
        raise DoesNotFit(
            f"{shape.name}: {shape.weights_bytes / GIB:.1f} GiB of weights leave "
            f"{capacity} KV tokens on {tp} GPU(s); one {context}-token context does not fit"
        )
    tight = capacity < TIGHT_SLACK * budget_tokens
    if tp < len(gpus):
        unused = len(gpus) - tp
        warnings.append(f"{unused} GPU(s) unused at tp={tp}: add workers behind the gateway")
    if capacity < budget_tokens:
        warnings.append(f"KV capacity {capacity} < site budget {budget_tokens} tokens: peaks queue")
    chunked = 2048 if tight else profile.chunked_prefill
    max_running = max(1, min(MAX_RUNNING_CAP, capacity // avg))
    pool_bytes = capacity * shape.kv_bytes_per_token
    ratio = hicache_ratio_for(site.host_ram_gb, pool_bytes)
    name = served_model_name or model_path.rstrip("/").rsplit("/", 1)[-1]

    argv = [python, "-m", "sglang.launch_server", "--model-path", model_path]
    argv += ["--served-model-name", name, "--host", host, "--port", str(port)]
    argv += ["--tp-size", str(tp), "--context-length", str(context)]
    argv += ["--mem-fraction-static", f"{fraction:g}", "--max-running-requests", str(max_running)]
    argv += ["--chunked-prefill-size", str(chunked)]
    argv += ["--schedule-policy", "lpm", "--radix-eviction-policy", "lru"]
    argv += ["--grammar-backend", "xgrammar", "--enable-metrics", "--enable-cache-report"]
    if ratio is not None:
        argv += ["--enable-hierarchical-cache", "--hicache-ratio", f"{ratio:g}"]
    return LaunchPlan(
        argv=tuple(argv),
        profile=profile.key,
        tp=tp,
        mem_fraction_static=fraction,
        kv_capacity_tokens=capacity,
        kv_bytes_per_token=shape.kv_bytes_per_token,
        weights_bytes=shape.weights_bytes,
        max_running_requests=max_running,
        chunked_prefill_size=chunked,
        context_length=context,
        hicache_ratio=ratio,
        served_model_name=name,
        host=host,
        port=port,
        warnings=tuple(warnings),
    )
