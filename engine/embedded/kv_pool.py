"""Preallocated per-slot KV storage for the running requests.

Each running request owns one slot: a row of ``[slots, kv_heads, capacity, head_dim]`` key and
value buffers per layer, holding its positions ``0 .. lengths[slot] - 1`` left-aligned. A step
writes the new tokens' KV in place (no per-step concatenation), and attention reads views of
the rows. The capacity grows (copying once) when a row would overflow it.

Invariants: ``lengths[s] <= capacity`` for every slot; positions at or past ``lengths[s]`` are
never read unmasked; buffers start zeroed, so masked positions hold finite values (a masked
probability of exactly 0 times a finite value is exactly 0).
"""

from __future__ import annotations

import torch

LayerKV = tuple[torch.Tensor, torch.Tensor]
# capacity grows in multiples of this many positions; decode attention reads whole rows, so
# this bounds the padding it reads (and growing copies the pool, so it is not tiny)
GROW = 256


def reserved_positions(context_length: int, kv_budget_tokens: int, slots: int) -> int:
    """Positions to size every row for up front: an even share of the KV budget, at most the
    context length, at least one."""
    return max(1, min(context_length, kv_budget_tokens // slots))


class KVPool:
    """Not thread-safe: the scheduler thread is its only user."""

    def __init__(
        self, layers: int, slots: int, kv_heads: int, head_dim: int, dtype: torch.dtype
    ) -> None:
        self.num_layers = layers
        self.slots = slots
        self.kv_heads = kv_heads
        self.head_dim = head_dim
        self.dtype = dtype
        self.capacity = 0
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.lengths = [0] * slots

    def ensure(self, positions: int) -> None:
        """Make every row able to hold ``positions`` positions."""
        if positions <= self.capacity:
            return
        cap = -(-positions // GROW) * GROW
        shape = (self.slots, self.kv_heads, cap, self.head_dim)
        keep = self.capacity
        new_k = [torch.zeros(shape, dtype=self.dtype) for _ in range(self.num_layers)]
        new_v = [torch.zeros(shape, dtype=self.dtype) for _ in range(self.num_layers)]
        if keep:
            for old, new in zip(self.keys + self.values, new_k + new_v, strict=True):
                new[:, :, :keep].copy_(old)
        self.keys, self.values, self.capacity = new_k, new_v, cap

    def load_pieces(self, slot: int, pieces: list[list[LayerKV]]) -> None:
        """Fill ``slot`` with consecutive runs of one request's KV (each run ``[1, H, n, D]``
        per layer, as ``RadixKVCache.match_pieces`` gives them); length becomes their sum."""
        length = sum(piece[0][0].shape[2] for piece in pieces) if pieces else 0
        self.ensure(max(length, 1))
        start = 0
        for piece in pieces:
            n = piece[0][0].shape[2]
            for layer, (k, v) in enumerate(piece):
                self.keys[layer][slot, :, start : start + n].copy_(k[0])
                self.values[layer][slot, :, start : start + n].copy_(v[0])
            start += n
        self.lengths[slot] = length

    def row(self, slot: int, length: int | None = None) -> list[LayerKV]:
        """Views of ``slot``'s first ``length`` positions, ``[1, H, length, D]`` per layer."""
        n = self.lengths[slot] if length is None else length
        return [
            (k[slot : slot + 1, :, :n], v[slot : slot + 1, :, :n])
            for k, v in zip(self.keys, self.values, strict=True)
        ]

    def move(self, src: int, dst: int) -> None:
        """Copy row ``src`` into row ``dst`` (``src`` keeps its data; the caller frees it)."""
        if src == dst:
            return
        n = self.lengths[src]
        for buf in self.keys + self.values:
            buf[dst, :, :n].copy_(buf[src, :, :n])
        self.lengths[dst] = n

    def swap(self, a: int, b: int) -> None:
        if a == b:
            return
        # only the positions in use move (rows are reserved for thousands of positions), through
        # one scratch row reused for every buffer (fresh memory faults in page by page)
        n = max(self.lengths[a], self.lengths[b])
        scratch = self.keys[0].new_empty(self.keys[0][a, :, :n].shape)
        for buf in self.keys + self.values:
            scratch.copy_(buf[a, :, :n])
            buf[a, :, :n].copy_(buf[b, :, :n])
            buf[b, :, :n].copy_(scratch)
        self.lengths[a], self.lengths[b] = self.lengths[b], self.lengths[a]

    def bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)
