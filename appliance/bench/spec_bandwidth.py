"""Memory bandwidth for ``appliance bench engine --speculative``: the machine's measured read
limit, and what one decode step of the embedded engine must read (weights plus KV, once)."""

from __future__ import annotations

import time

import torch

from engine.embedded.engine import EmbeddedEngine

LIMIT_BYTES = 1 << 30  # 1 GiB: far beyond any cache


def measured_read_limit(repeats: int = 5) -> float:
    """Bytes/s of the fastest of ``repeats`` sums over a 1 GiB float32 tensor, on the threads
    torch uses (the engine's): a streaming read, the most a decode step could get."""
    data = torch.ones(LIMIT_BYTES // 4, dtype=torch.float32)
    best = float("inf")
    with torch.inference_mode():
        for _ in range(repeats):
            start = time.perf_counter()
            data.sum()
            best = min(best, time.perf_counter() - start)
    return LIMIT_BYTES / best


def weight_bytes(engine: EmbeddedEngine) -> int:
    """The bytes of every distinct parameter tensor (a tied embedding counted once: the
    lm_head reads it whole every step; the embedding lookup reads only a few rows). Matrices
    count in the dtype the step reads them in: a float32 engine's linears on the GEMV read
    bfloat16 panels."""
    seen: set[int] = set()
    total = 0
    matrix = torch.finfo(engine.linear_dtype).bits // 8
    for p in engine.model.parameters():
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            total += p.numel() * (matrix if p.dim() == 2 else p.element_size())
    return total


def kv_bytes_per_token(engine: EmbeddedEngine) -> int:
    cfg = engine.model.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    elem = torch.finfo(engine.model.dtype).bits // 8
    return 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * head_dim * elem


def step_bytes(engine: EmbeddedEngine, row_lengths: list[int]) -> int:
    """What one decode step over rows of these lengths must read: weights once, each row's KV
    once (the physical minimum; attention on PyTorch pads rows, reading more)."""
    return weight_bytes(engine) + kv_bytes_per_token(engine) * sum(row_lengths)
