"""Residual add + RMSNorm in float32 on the AVX2 kernel (``kernels/pointwise_avx2.c``), for the
fused runner where the engine runs in float32: one call where PyTorch's ``rms_norm`` ran as
several ops (34 against about 5 microseconds for a decode row, 61 calls a step)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import torch

_PTR, _I64, _INT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int


class NativeNormF32:
    """``add_rms_norm`` over float32 rows (from the AVX2 library, ``gemv_f32.py``)."""

    def __init__(self, library: Path) -> None:
        fn = ctypes.CDLL(str(library)).add_rms_norm_f32
        fn.argtypes = [_PTR, _I64, _PTR, _I64, _PTR, _PTR, _I64, _INT, _INT, ctypes.c_float]
        fn.argtypes += [_INT]
        fn.restype = _INT
        self._fn = fn

    @staticmethod
    def supports(hidden: int) -> bool:
        return hidden % 8 == 0 and hidden > 0

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
