"""The float32 fused runner's pointwise work on the AVX2 kernels (``kernels/pointwise_avx2.c``):
residual add + RMSNorm in one call where PyTorch's ``rms_norm`` ran as several ops (34 against
about 5 microseconds for a decode row, 61 calls a step), and SiLU-gate and rotary embedding in
one pass each (PyTorch's took about 160 ms of a 1,550-token prompt's step on a 2-vCPU EPYC)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import torch

_PTR, _I64, _INT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int


class NativePointwiseF32:
    """``add_rms_norm``, ``silu_mul`` and ``rope_`` over float32 rows (from the AVX2 library,
    ``gemv_f32.py``)."""

    def __init__(self, library: Path) -> None:
        lib = ctypes.CDLL(str(library))
        fn = lib.add_rms_norm_f32
        fn.argtypes = [_PTR, _I64, _PTR, _I64, _PTR, _PTR, _I64, _INT, _INT, ctypes.c_float]
        fn.argtypes += [_INT]
        fn.restype = _INT
        self._fn = fn
        silu = lib.silu_mul_f32
        silu.argtypes = [_PTR, _I64, _PTR, _I64, _INT, _INT, _INT]
        silu.restype = _INT
        rope = lib.rope_inplace_f32
        rope.argtypes = [_PTR, _I64, _PTR, _PTR, _I64] + [_INT] * 4
        rope.restype = _INT
        self._silu, self._rope = silu, rope

    @staticmethod
    def supports(hidden: int) -> bool:
        """Whether ``add_rms_norm`` takes rows of ``hidden`` columns."""
        return hidden % 8 == 0 and hidden > 0

    @staticmethod
    def rope_supports(head_dim: int) -> bool:
        """Whether ``rope_`` takes heads of ``head_dim``."""
        return head_dim % 16 == 0 and head_dim > 0

    def add_rms_norm(
        self, h: torch.Tensor, delta: torch.Tensor | None, weight: torch.Tensor, eps: float
    ) -> torch.Tensor:
        """``h += delta`` in place (when given), then RMSNorm of ``h`` times ``weight``;
        ``[n, dim]`` float32 with contiguous rows. Returns the normalised rows."""
        n, dim = h.shape
        for t in (h, delta, weight):
            if t is not None and (t.dtype != torch.float32 or t.stride(-1) != 1):
                raise ValueError("RMSNorm kernel: float32 rows with a contiguous last dim")
        if delta is not None and delta.shape != h.shape:
            raise ValueError("RMSNorm kernel: the residual must match the hidden states")
        if weight.shape != (dim,) or not self.supports(dim):
            raise ValueError("RMSNorm kernel: a weight per column, a multiple of 8 columns")
        out = torch.empty(n, dim, dtype=torch.float32)
        if not n:
            return out
        rc = self._fn(
            h.data_ptr(), h.stride(0),
            delta.data_ptr() if delta is not None else None,
            delta.stride(0) if delta is not None else 0,
            weight.data_ptr(), out.data_ptr(), out.stride(0),
            n, dim, eps, torch.get_num_threads(),
        )  # fmt: skip
        if rc != 0:
            raise RuntimeError("RMSNorm kernel: refused the shape")
        return out

    def silu_mul(self, gate_up: torch.Tensor) -> torch.Tensor:
        """``silu(gate) * up`` for ``gate_up`` ``[n, 2 * half]`` (gate first, contiguous rows),
        float32, half a multiple of 8."""
        n, width = gate_up.shape
        if gate_up.dtype != torch.float32 or gate_up.stride(-1) != 1 or width % 16:
            raise ValueError("SiLU-gate kernel: float32 rows of a multiple of 16 columns")
        out = gate_up.new_empty((n, width // 2))
        if not n:
            return out
        rc = self._silu(
            gate_up.data_ptr(), gate_up.stride(0), out.data_ptr(), out.stride(0),
            n, width // 2, torch.get_num_threads(),
        )  # fmt: skip
        if rc != 0:
            raise RuntimeError("SiLU-gate kernel: refused the shape")
        return out

    def rope_(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Rotary embedding in place: ``x`` ``[n, heads, dim]`` (rows may be strided, heads
        contiguous), ``cos``/``sin`` ``[n, dim]``; all float32. Returns ``x``."""
        n, heads, dim = x.shape
        for t in (cos, sin):
            if t.dtype != torch.float32 or t.stride(-1) != 1:
                raise ValueError("rotary kernel: float32 cos and sin with a contiguous last dim")
        if x.dtype != torch.float32 or x.stride(2) != 1 or x.stride(1) != dim:
            raise ValueError("rotary kernel: float32 [n, heads, dim] rows")
        if cos.shape != (n, dim) or sin.shape != (n, dim) or cos.stride() != sin.stride():
            raise ValueError("rotary kernel: cos and sin must be [n, dim] alike")
        if not self.rope_supports(dim):
            raise ValueError("rotary kernel: a head size that is a multiple of 16")
        if not n:
            return x
        rc = self._rope(
            x.data_ptr(), x.stride(0), cos.data_ptr(), sin.data_ptr(), cos.stride(0),
            n, heads, dim, torch.get_num_threads(),
        )  # fmt: skip
        if rc != 0:
            raise RuntimeError("rotary kernel: refused the shape")
        return x
