"""The native linear (``kernels/gemv.c``): bfloat16 rows times a weight matrix packed once into
the kernel's panels. A decode step's linears are bound by reading the weights; this reads them
at 25-37 GB/s where oneDNN's GEMM reads 16-22 (2-core Zen 4 VM, cold weights), and on prefill
sizes it keeps pace with oneDNN there (0.97x its time at 512 and 1,550 rows). Where the engine
finds it faster (``calibrate.gemv_wins``), ``linear.make_linear`` runs every step on it.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

import torch

_PTR, _I64, _INT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
PANEL_OUTPUTS = 32  # the kernel's blocks: a weight's output count must be a multiple


@dataclass
class GemvSwitch:
    """Whether a runner's linears run on the native GEMV, for steps of every size, or all on
    oneDNN. One instance is shared by a runner's linears, so the engine can set it once it has
    timed both on this machine (``calibrate.gemv_wins``).

    Never by step size: each side computes a row the same way whatever else its step holds
    (the GEMV for any number of rows, one row at a time; oneDNN's prepacked GEMM on SmolLM2's
    shapes on Zen 4, though on an AMX Xeon a 1-row and a 619-row product rounded apart), but
    the two differ from each other in the last bits. A crossover by size let a decode row's
    result depend on whether a prompt chunk or drafts shared its step, so greedy text changed
    with speculation and with the other requests running (3 of 8 texts the same, 8 at once)."""

    on: bool = True


class NativeGemv:
    """Packs weights for, and runs, the native linear (bfloat16 only). ``gemv_f32.py`` runs
    float32 rows on the same panels: a subclass naming another product and row type."""

    PRODUCT = "gemv_bf16"  # the library's product for rows of DTYPE
    DTYPE = torch.bfloat16

    def __init__(self, library: Path) -> None:
        lib = ctypes.CDLL(str(library))
        self._pack = lib.gemv_pack
        self._pack.argtypes = [_PTR, _INT, _INT, _PTR]
        self._run = getattr(lib, self.PRODUCT)
        self._run.argtypes = [_PTR, _I64, _INT, _PTR, _INT, _INT, _PTR, _I64, _INT]
        for fn in (self._pack, self._run):
            fn.restype = _INT
        self.library = library

    @staticmethod
    def fits(weight: torch.Tensor) -> bool:
        """``weight`` ``[n, k]`` is bfloat16 with n a multiple of 32 and k even."""
        n, k = weight.shape
        return weight.dtype == torch.bfloat16 and n % PANEL_OUTPUTS == 0 and k % 2 == 0 and k > 0

    def pack(self, weight: torch.Tensor, checked: bool = False) -> torch.Tensor:
        """The kernel's bfloat16 panels of ``weight`` (a new tensor). ``checked``: the caller
        has just seen ``fits(weight)`` hold (the float32 check compares every value, once)."""
        if weight.dim() != 2 or not (checked or self.fits(weight)):
            raise ValueError(
                f"gemv: the weight must be [n, k] {self.DTYPE} (values bfloat16 holds), "
                "n % 32 == 0, k even"
            )
        w = weight.detach().bfloat16().contiguous()
        panels = torch.empty(w.numel(), dtype=torch.bfloat16)
        if self._pack(w.data_ptr(), w.shape[0], w.shape[1], panels.data_ptr()) != 0:
            raise ValueError("gemv: the kernel refused the weight's shape")
        return panels

    def __call__(self, x: torch.Tensor, panels: torch.Tensor, n: int) -> torch.Tensor:
        """``x`` ``[m, k]`` of DTYPE (any row stride, contiguous rows) times the weight that
        ``panels`` packs (``n`` outputs): ``[m, n]`` of DTYPE."""
        m, k = x.shape
        if x.dtype != self.DTYPE or x.stride(1) != 1 or panels.numel() != n * k:
            raise ValueError(f"gemv: x must be [m, k] {self.DTYPE} rows matching the weight")
        y = torch.empty(m, n, dtype=self.DTYPE)
        rc = self._run(
            x.data_ptr(), x.stride(0), m, panels.data_ptr(), n, k, y.data_ptr(), n,
            torch.get_num_threads(),
        )  # fmt: skip
        if rc != 0:
            raise ValueError("gemv: the kernel refused the shapes")
        return y
