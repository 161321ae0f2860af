"""A left-padded batch of per-request KV caches, for batched decode steps.

Row ``i`` holds ``lengths[i]`` real positions, right-aligned in a ``[B, kv_heads, T, head_dim]``
tensor per layer (``T`` = the longest row); the positions before them are padding that the
attention mask hides. Membership changes (a request joins or leaves) copy the tensors once;
a decode step appends one column to every row.

Invariants: ``mask[i, :T - lengths[i]] == 0`` and ``mask[i, T - lengths[i]:] == 1``; every
layer's tensors have ``T`` positions.
"""

from __future__ import annotations

import torch

LayerKV = tuple[torch.Tensor, torch.Tensor]


def _left_pad(t: torch.Tensor, width: int) -> torch.Tensor:
    if width == 0:
        return t
    pad = t.new_zeros((t.shape[0], t.shape[1], width, t.shape[3]))
    return torch.cat([pad, t], dim=2)


class PaddedBatch:
    def __init__(self) -> None:
        self.layers: list[LayerKV] = []
        self.lengths: list[int] = []

    @property
    def size(self) -> int:
        return len(self.lengths)

    @property
    def width(self) -> int:
        return self.layers[0][0].shape[2] if self.layers else 0

    def add(self, kv: list[LayerKV]) -> None:
        """Append one request's KV (``[1, H, L, D]`` per layer) as the last row."""
        length = kv[0][0].shape[2]
        if not self.layers:
            self.layers = list(kv)
            self.lengths = [length]
            return
        width = max(self.width, length)
        grow = width - self.width
        self.layers = [
            (
                torch.cat([_left_pad(k, grow), _left_pad(nk, width - length)], dim=0),
                torch.cat([_left_pad(v, grow), _left_pad(nv, width - length)], dim=0),
            )
            for (k, v), (nk, nv) in zip(self.layers, kv, strict=True)
        ]
        self.lengths.append(length)

    def remove(self, rows: list[int]) -> None:
        """Drop ``rows``, then trim padding columns that no remaining row needs."""
        keep = [i for i in range(self.size) if i not in set(rows)]
        if not keep:
            self.layers, self.lengths = [], []
            return
        self.lengths = [self.lengths[i] for i in keep]
        start = self.width - max(self.lengths)
        index = torch.tensor(keep)
        self.layers = [
            (k.index_select(0, index)[:, :, start:], v.index_select(0, index)[:, :, start:])
            for k, v in self.layers
        ]

    def row(self, i: int) -> list[LayerKV]:
        """Row ``i``'s real positions, ``[1, H, lengths[i], D]`` per layer (views)."""
        start = self.width - self.lengths[i]
        return [(k[i : i + 1, :, start:], v[i : i + 1, :, start:]) for k, v in self.layers]

    def step_inputs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(attention_mask ``[B, T + 1]``, position_ids ``[B, 1]``) for one new token per row."""
        width = self.width
        mask = torch.zeros((self.size, width + 1), dtype=torch.long)
        for i, length in enumerate(self.lengths):
            mask[i, width - length :] = 1
        positions = torch.tensor(self.lengths, dtype=torch.long).unsqueeze(1)
        return mask, positions

    def advanced(self, layers: list[LayerKV]) -> None:
        """Take the cache tensors after a step that appended one position to every row."""
        assert layers[0][0].shape[2] == self.width + 1
        self.layers = layers
        self.lengths = [n + 1 for n in self.lengths]
