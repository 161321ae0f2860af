"""What the native attention kernels' tests share: the skip where the kernels cannot run, a
built library, and float32 attention to check them against."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine.embedded.native import NativeKernels, load_native_kernels, unsupported_reason

REASON = unsupported_reason()
needs_kernel = pytest.mark.skipif(REASON is not None, reason=f"native kernel cannot run: {REASON}")


def built_kernel(tmp_path_factory: pytest.TempPathFactory) -> NativeKernels:
    """The kernels built for real with the system compiler, in a fresh folder."""
    loaded = load_native_kernels(tmp_path_factory.mktemp("kernels"))
    assert loaded is not None
    return loaded


def reference_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int
) -> torch.Tensor:
    """float32 causal attention of queries at ``start ..`` over keys ``0 .. start + n - 1``;
    ``q`` ``[Hq, n, D]``, ``k``/``v`` ``[Hkv, L, D]``; returns ``[n, Hq, D]``."""
    end = start + q.shape[1]
    visible = torch.arange(end).unsqueeze(0) <= torch.arange(start, end).unsqueeze(1)
    out = F.scaled_dot_product_attention(
        q.float()[None],
        k[:, :end].float()[None],
        v[:, :end].float()[None],
        attn_mask=visible,
        scale=q.shape[-1] ** -0.5,
        enable_gqa=True,
    )
    return out[0].transpose(0, 1)
