"""Pure launch tuning: GPUs + model shape + site needs -> the SGLang workers' command lines.

Formulas (all memory in bytes; GiB = 2**30):

* reserve per GPU = activations + CUDA graphs + headroom, where activations =
  3 GiB x chunked_prefill / 8192, CUDA graphs = 2 GiB, headroom = the profile's 5-8 GiB kept
  free at start-up for long multi-turn contexts.
* ``--mem-fraction-static`` = clamp(1 - reserve / per_gpu_memory, profile band), floored to
  3 decimals. H100 80GB: 1 - 11/79.65 = 0.861 (band 0.85-0.88); H200: 1 - 13/140.4 = 0.907
  -> 0.90 (band 0.88-0.90); L40S 48GB: 1 - 8.5/45 = 0.811 (band 0.78-0.85).
* KV capacity tokens = (fraction x tp x per_gpu_memory - weights) / kv_bytes_per_token.
* Workers: the box is split into GPU groups of ``--tp-size`` GPUs, one SGLang worker each
  (behind the gateway when there are several). The group size is the smallest power of two
  (else every GPU of the box) that holds the weights plus one full context and whose workers
  together cover the site's KV budget = concurrency x min(avg tokens per request, context
  length) tokens; no GPU stays idle when the model fits on fewer GPUs than the box has. When
  no split covers the budget, the split holding the most KV (usually one worker on every GPU).
* Each worker is tuned for its share: concurrency / workers sessions, host RAM / workers.
* ``--max-running-requests`` = min(256, capacity / avg tokens per request), at least 1.
* ``--chunked-prefill-size`` = the profile's (8192 on 80 GB+ Hopper/A100, 4096 on 48 GB), or
  2048 when the KV budget is tight (capacity < 1.25 x the worker's share of the budget).
* HiCache (host-RAM second tier) when the worker's share of the host RAM, after a reserve for
  the OS, the app and SGLang, holds >= 2x its GPU KV pool: ``--enable-hierarchical-cache
  --hicache-size G`` (per TP rank, up to 4x the pool), write-through, page size 64
  (``engine.sglang.hicache``).
* ``speculative="ngram"`` (off by default) adds NGRAM speculative decoding, caps
  ``--max-running-requests`` at 48 and keeps page size 1 (``engine.sglang.speculative``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.sglang import speculative as spec
from engine.sglang.gpu_info import GIB, GpuInfo, GpuProfile, match_profile
from engine.sglang.hicache import PAGE_SIZE, hicache_args, hicache_for, usable_host_gb
from engine.sglang.launch_plan import BoxPlan, DoesNotFit, LaunchPlan, SiteNeeds
from engine.sglang.model_shape import ModelShape

__all__ = ["BoxPlan", "DoesNotFit", "LaunchPlan", "SiteNeeds", "tune"]

CUDA_GRAPH_GIB = 2.0
ACTIVATION_GIB_PER_8K = 3.0
MAX_RUNNING_CAP = 256
TIGHT_SLACK = 1.25


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


@dataclass(frozen=True)
class Groups:
    """How a box's GPUs are split: ``count`` workers of ``tp`` GPUs, each holding ``capacity``
    KV tokens."""

    tp: int
    count: int
    capacity: int


def choose_groups(
    n_gpus: int, fraction: float, per_gpu: int, shape: ModelShape, context: int, budget: int
) -> Groups:
    """The smallest GPU group that holds the weights plus one full context and whose workers
    together cover the site's KV budget; when no split covers it, the one holding the most KV
    (weights are copied once per worker, so fewer, larger groups hold more)."""
    fitting: list[Groups] = []
    for size in tp_candidates(n_gpus):
        capacity = kv_capacity(fraction, size, per_gpu, shape)
        if capacity < context:
            continue
        groups = Groups(size, n_gpus // size, capacity)
        if groups.count * capacity >= budget:
            return groups
        fitting.append(groups)
    if not fitting:
        capacity = kv_capacity(fraction, n_gpus, per_gpu, shape)
        raise DoesNotFit(
            f"{shape.name}: {shape.weights_bytes / GIB:.1f} GiB of weights leave "
            f"{capacity} KV tokens on {n_gpus} GPU(s); one {context}-token context does not fit"
        )
    return max(fitting, key=lambda g: g.count * g.capacity)


# Each worker's NCCL/TCPStore port, set rather than left to SGLang: unset, each worker picks
# a random free port in 22000-29999 and binds it later, so workers starting together can pick
# the same one (sglang 0.5.23 ``PortArgs.init_new``). HTTP port + 1000 stays below the
# kernel's ephemeral range for the default ports (30000 + i -> 31000 + i).
NCCL_PORT_OFFSET = 1000


def worker_port(port: int, index: int) -> int:
    """Worker ``index``'s HTTP port: consecutive from the engine port."""
    return port + index


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
    speculative: str = "",
) -> BoxPlan:
    """Choose the SGLang workers for this box, model and site, and each one's launch;
    ``speculative`` is ``""`` (off) or ``"ngram"``."""
    algorithm = spec.check(speculative)
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
    budget = max(context, site.concurrency * avg)
    fraction = fraction_for(profile, per_gpu, profile.chunked_prefill)
    groups = choose_groups(len(gpus), fraction, per_gpu, shape, context, budget)
    used = groups.tp * groups.count
    idle = tuple(g.index for g in gpus[used:])
    if idle:
        warnings.append(
            f"GPU(s) {', '.join(map(str, idle))} unused: {groups.count} worker(s) of "
            f"{groups.tp} GPU(s) each"
        )
    if groups.count * groups.capacity < budget:
        total = groups.count * groups.capacity
        warnings.append(f"KV capacity {total} < site budget {budget} tokens: peaks queue")
    # each worker serves its share of the sessions (the gateway spreads them) from its share
    # of the host RAM left after the reserves (HiCache)
    share = SiteNeeds(
        context,
        -(-site.concurrency // groups.count),
        usable_host_gb(site.host_ram_gb, groups.count),
        avg,
    )
    name = served_model_name or model_path.rstrip("/").rsplit("/", 1)[-1]
    split = groups.count > 1 or bool(idle)
    workers = tuple(
        _worker(
            profile.key,
            shape,
            share,
            groups,
            fraction,
            profile.chunked_prefill,
            gpu_ids=tuple(g.index for g in gpus[i * groups.tp : (i + 1) * groups.tp])
            if split
            else (),
            model_path=model_path,
            name=name,
            host=host,
            port=worker_port(port, i),
            python=python,
            speculative=algorithm,
        )
        for i in range(groups.count)
    )
    return BoxPlan(workers, tuple(warnings), idle)


def _worker(
    profile: str,
    shape: ModelShape,
    share: SiteNeeds,
    groups: Groups,
    fraction: float,
    profile_chunk: int,
    *,
    gpu_ids: tuple[int, ...],
    model_path: str,
    name: str,
    host: str,
    port: int,
    python: str,
    speculative: spec.Speculative = "",
) -> LaunchPlan:
    """One worker's launch, tuned for its share of the site (``share.host_ram_gb``: the host
    RAM its HiCache may use)."""
    capacity, context, avg = groups.capacity, share.context_length, share.avg_tokens_per_request
    budget = max(context, share.concurrency * avg)
    chunked = 2048 if capacity < TIGHT_SLACK * budget else profile_chunk
    cap = spec.MAX_RUNNING if speculative else MAX_RUNNING_CAP
    max_running = max(1, min(cap, capacity // avg))
    cache = hicache_for(share.host_ram_gb, capacity * shape.kv_bytes_per_token, groups.tp)
    argv = [python, "-m", "sglang.launch_server", "--model-path", model_path]
    argv += ["--served-model-name", name, "--host", host, "--port", str(port)]
    argv += ["--nccl-port", str(port + NCCL_PORT_OFFSET)]
    argv += ["--tp-size", str(groups.tp), "--context-length", str(context)]
    argv += ["--mem-fraction-static", f"{fraction:g}", "--max-running-requests", str(max_running)]
    argv += ["--chunked-prefill-size", str(chunked)]
    argv += ["--schedule-policy", "lpm", "--radix-eviction-policy", "lru"]
    argv += ["--grammar-backend", "xgrammar", "--enable-metrics", "--enable-cache-report"]
    if cache is not None:
        argv += hicache_args(cache, paged=not speculative)
    if speculative == "ngram":
        argv = spec.without_incompatible(argv) + spec.ngram_args()
    page_size = 1 if cache is None or speculative else PAGE_SIZE
    return LaunchPlan(
        argv=tuple(argv),
        profile=profile,
        tp=groups.tp,
        mem_fraction_static=fraction,
        kv_capacity_tokens=capacity,
        kv_bytes_per_token=shape.kv_bytes_per_token,
        weights_bytes=shape.weights_bytes,
        max_running_requests=max_running,
        chunked_prefill_size=chunked,
        context_length=context,
        hicache_ratio=None if cache is None else cache.ratio,
        hicache_size_gb=0 if cache is None else cache.size_gb,
        page_size=page_size,
        speculative=speculative,
        served_model_name=name,
        host=host,
        port=port,
        gpu_ids=gpu_ids,
    )
