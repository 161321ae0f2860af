"""The native small-batch linear (``kernels/gemv.c``): a few bfloat16 rows times a weight
matrix packed once into the kernel's panels. A decode step's linears are bound by reading the
weights; this reads them at 25-37 GB/s where oneDNN's GEMM reads 16-22 (2-core Zen 4 VM, cold
weights). ``linear.make_linear`` uses it for steps of up to ``GEMV_ROWS`` rows.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

import torch

_PTR, _I64, _INT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
PANEL_OUTPUTS = 32  # the kernel's blocks: a weight's output count must be a multiple
# the most rows a step may have to run here: a decode step of 8 streams with their drafts
# (up to 24 rows) included. Measured on SmolLM2's shapes (2 threads, Zen 4), the kernel runs
# 1.3-1.8x oneDNN's prepacked GEMM at 1-8 rows and 1.0-1.3x at 16-32; it still matches it at
# 512 rows here, but prefill stays on oneDNN, whose GEMM uses AMX tiles where a CPU has them.
# On a CPU with AMX (2-core Xeon) oneDNN wins from 4 rows on (1.7x at 8, 2.9x at 32), so the
# engine times both and may set the limit to 0 (``GemvLimit``, ``calibrate.gemv_wins``)
GEMV_ROWS = 32


@dataclass
class GemvLimit:
    """Steps of up to ``rows`` rows run on the native GEMV, larger ones on oneDNN (0: none on
    the GEMV). One instance is shared by a runner's linears, so the engine can set it once it
    has timed both on this machine."""

    rows: int = GEMV_ROWS


class NativeGemv:
    """Packs weights for, and runs, the native small-batch linear (bfloat16 only)."""

    def __init__(self, library: Path) -> None:
        lib = ctypes.CDLL(str(library))
        self._pack = lib.gemv_pack
        self._pack.argtypes = [_PTR, _INT, _INT, _PTR]
        self._run = lib.gemv_bf16
        self._run.argtypes = [_PTR, _I64, _INT, _PTR, _INT, _INT, _PTR, _I64, _INT]
        for fn in (self._pack, self._run):
            fn.restype = _INT

    @staticmethod
    def fits(weight: torch.Tensor) -> bool:
        """``weight`` ``[n, k]`` is bfloat16 with n a multiple of 32 and k even."""
        n, k = weight.shape
        return weight.dtype == torch.bfloat16 and n % PANEL_OUTPUTS == 0 and k % 2 == 0 and k > 0

    def pack(self, weight: torch.Tensor) -> torch.Tensor:
        """The kernel's panels of ``weight`` (a new tensor of the same size)."""
        if weight.dim() != 2 or not self.fits(weight):
            raise ValueError("gemv: the weight must be [n, k] bfloat16, n % 32 == 0, k even")
        w = weight.detach().contiguous()
        panels = torch.empty(w.numel(), dtype=torch.bfloat16)
        if self._pack(w.data_ptr(), w.shape[0], w.shape[1], panels.data_ptr()) != 0:
            raise ValueError("gemv: the kernel refused the weight's shape")
        return panels

    def __call__(self, x: torch.Tensor, panels: torch.Tensor, n: int) -> torch.Tensor:
        """``x`` ``[m, k]`` bfloat16 (any row stride, contiguous rows) times the weight that
        ``panels`` packs (``n`` outputs): ``[m, n]`` bfloat16."""
        m, k = x.shape
        if x.dtype != torch.bfloat16 or x.stride(1) != 1 or panels.numel() != n * k:
            raise ValueError("gemv: x must be [m, k] bfloat16 rows matching the weight")
        y = torch.empty(m, n, dtype=torch.bfloat16)
        rc = self._run(
            x.data_ptr(), x.stride(0), m, panels.data_ptr(), n, k, y.data_ptr(), n,
            torch.get_num_threads(),
        )  # fmt: skip
        if rc != 0:
            raise ValueError("gemv: the kernel refused the shapes")
        return y
