"""HiCache (SGLang's host-RAM second KV tier): how much host RAM one worker gets, and its flags.

Sizing (pure; GB = 1e9 bytes, as SGLang's ``--hicache-size`` counts):

* usable host RAM = (host RAM - ``APP_HOST_RESERVE_GB`` - ``SGLANG_HOST_RESERVE_GB``) x
  ``HOST_SHARE``, split evenly between the box's workers (each launches its own host pool);
* on when a worker's share holds at least ``MIN_RATIO`` x its GPU KV pool, capped at
  ``MAX_RATIO`` x the pool (beyond that the host tier mostly holds conversations that ended);
* ``--hicache-size`` is GB *per TP rank* (sglang 0.5.23 ``mem_cache/pool_host/base.py``:
  ``host_size * 1e9 // size_per_token`` on every rank), so the worker's share / tp, floored.
  An absolute size, not ``--hicache-ratio``: SGLang refuses to start when the host pool does not
  fit (same file, ``_allocate_host_buffer``: "Not enough host memory available"), and a ratio
  multiplies SGLang's own device pool, which our estimate only approximates.

Flags and values are checked against sglang 0.5.23 ``srt/arg_groups/fields/memory.py`` (choices)
and ``srt/arg_groups/hicache_hook.py`` / ``kv_cache_hook.py`` (the rules it enforces).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Host RAM kept for everything but the host KV pool: the OS and page cache, the appliance app
# (embedding model, FAISS index, Gradio, DB client) and SGLang's own processes (tokenizer,
# detokenizer, one scheduler per TP rank: a few GB each). An estimate, not yet measured on a
# GPU box; generous so a growing index never pushes the box into swap.
APP_HOST_RESERVE_GB = 16.0
# SGLang itself refuses a host pool above free RAM minus 10 GiB
# (sglang 0.5.23 mem_cache/pool_host/base.py: HICACHE_HOST_MEMORY_RESERVE_BYTES = 10 * 1024**3).
SGLANG_HOST_RESERVE_GB = 10 * 2**30 / 1e9
# Of what remains, the share the host pools may take: SGLang's own default for auto-sizing
# (``--hicache-host-memory-fraction`` 0.8, fields/memory.py); the rest absorbs RSS growth.
HOST_SHARE = 0.8
MIN_RATIO = 2.0
MAX_RATIO = 4.0
# Tokens per KV page with HiCache on: SGLang's HiCache guide sets ``--page-size 64`` (fewer,
# larger host<->device copies; docs advanced_features/hicache_best_practices). The CUDA default
# without it is 1 (arg_groups/overrides.py ``_page_size_default``). Prefixes then match in whole
# pages: up to 63 tokens of a shared prefix are recomputed, nothing for RAG prompts of 4k+.
PAGE_SIZE = 64
# write_through: every new KV page is copied to host at once, so a conversation evicted from
# the GPU comes back from host RAM (write_back copies only on eviction; write_through_selective
# only pages hit before). Choices: write_back, write_through, write_through_selective.
WRITE_POLICY = "write_through"
# kernel io with the page_first host layout: SGLang's defaults and the pairing its guide
# recommends; hicache_hook.py rewrites only page_first+direct and page_first_direct+kernel.
IO_BACKEND = "kernel"
MEM_LAYOUT = "page_first"


@dataclass(frozen=True)
class HiCache:
    """One worker's host KV tier: ``size_gb`` per TP rank, and the host:GPU pool ratio it
    amounts to (for display)."""

    size_gb: int
    ratio: float


def usable_host_gb(host_ram_gb: float, workers: int = 1) -> float:
    """Host RAM one worker's host pools may take (GB), after the reserves (module docstring)."""
    free = host_ram_gb - APP_HOST_RESERVE_GB - SGLANG_HOST_RESERVE_GB
    return max(0.0, free * HOST_SHARE / max(1, workers))


def hicache_for(usable_gb: float, pool_bytes: float, tp: int) -> HiCache | None:
    """The host tier for a worker with ``usable_gb`` of host RAM and a GPU KV pool of
    ``pool_bytes`` over ``tp`` GPUs; None when it would hold less than ``MIN_RATIO`` x the pool."""
    if pool_bytes <= 0 or tp < 1:
        return None
    host_bytes = min(usable_gb * 1e9, MAX_RATIO * pool_bytes)
    size_gb = math.floor(host_bytes / tp / 1e9)
    ratio = math.floor(size_gb * tp * 1e9 / pool_bytes * 10) / 10
    return HiCache(size_gb, ratio) if ratio >= MIN_RATIO else None


def hicache_args(cache: HiCache, *, paged: bool = True) -> list[str]:
    """The launch flags for ``cache``; ``paged`` False keeps SGLang's page size 1 (NGRAM's
    draft tree needs it, see ``engine.sglang.speculative``)."""
    argv = ["--enable-hierarchical-cache", "--hicache-size", str(cache.size_gb)]
    argv += ["--hicache-write-policy", WRITE_POLICY]
    argv += ["--hicache-io-backend", IO_BACKEND, "--hicache-mem-layout", MEM_LAYOUT]
    if paged:
        argv += ["--page-size", str(PAGE_SIZE)]
    return argv
