"""The float32 engine's native linear (``kernels/gemv_avx2.c``), for CPUs without AVX-512 BF16.

There the engine runs in float32 (``engine.pick_dtype``) and none of the AVX-512 kernels
load, so a decode step's linears ran on ``F.linear``, reading 4 bytes a weight. This kernel
keeps each weight in bfloat16 panels (2 bytes) and computes in float32; it takes a weight only
where bfloat16 holds every value exactly (a model shipped in bfloat16, as SmolLM2 is), so
the products are the float32 model's own. SmolLM2-135M's linears for 1 decode row: 10.5 ms
against F.linear's 37 and oneDNN's prepacked float32 24 (2-core AMD EPYC with AVX2).

Like the AVX-512 GEMV it runs every step of every size when the engine times it faster
(``calibrate.gemv_wins``): each row's result is the same whatever its step holds.
"""

from __future__ import annotations

import ctypes
import logging
import subprocess
from pathlib import Path

import torch

from engine.embedded.cbuild import compile_library, find_compiler
from engine.embedded.gemv import PANEL_OUTPUTS
from engine.embedded.native import KERNELS, cpu_flags, default_cache_dir

log = logging.getLogger(__name__)

# one library: the linear and the decode attention (``attention_f32.py``)
SOURCES = (KERNELS / "gemv_avx2.c", KERNELS / "gemv_pack.c", KERNELS / "attention_avx2.c")
HEADERS = (KERNELS / "gemv_pack.h",)
FLAGS = ("-O3", "-shared", "-fPIC", "-fopenmp", "-mavx2", "-mfma")
NEEDED = frozenset({"avx2", "fma"})

_PTR, _I64, _INT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int


class NativeGemvF32:
    """Packs weights for, and runs, the float32 linear on bfloat16 panels."""

    name = "avx2"

    def __init__(self, library: Path) -> None:
        lib = ctypes.CDLL(str(library))
        self._pack = lib.gemv_pack
        self._pack.argtypes = [_PTR, _INT, _INT, _PTR]
        self._run = lib.gemv_f32_bf16
        self._run.argtypes = [_PTR, _I64, _INT, _PTR, _INT, _INT, _PTR, _I64, _INT]
        for fn in (self._pack, self._run):
            fn.restype = _INT
        self.library = library

    @staticmethod
    def fits(weight: torch.Tensor) -> bool:
        """``weight`` ``[n, k]`` is float32, n a multiple of 32, k even, and every value is
        exactly a bfloat16 (else its product would not be the model's)."""
        n, k = weight.shape
        if weight.dtype != torch.float32 or n % PANEL_OUTPUTS or k % 2 or k <= 0:
            return False
        return bool(torch.equal(weight.detach().bfloat16().float(), weight.detach()))

    def pack(self, weight: torch.Tensor) -> torch.Tensor:
        """The kernel's bfloat16 panels of ``weight`` (half its bytes)."""
        if weight.dim() != 2 or not self.fits(weight):
            raise ValueError("gemv: the weight must be [n, k] float32 that bfloat16 holds")
        w = weight.detach().bfloat16().contiguous()
        panels = torch.empty(w.numel(), dtype=torch.bfloat16)
        if self._pack(w.data_ptr(), w.shape[0], w.shape[1], panels.data_ptr()) != 0:
            raise ValueError("gemv: the kernel refused the weight's shape")
        return panels

    def __call__(self, x: torch.Tensor, panels: torch.Tensor, n: int) -> torch.Tensor:
        """``x`` ``[m, k]`` float32 (any row stride, contiguous rows) times the weight that
        ``panels`` packs (``n`` outputs): ``[m, n]`` float32."""
        m, k = x.shape
        if x.dtype != torch.float32 or x.stride(1) != 1 or panels.numel() != n * k:
            raise ValueError("gemv: x must be [m, k] float32 rows matching the weight")
        y = torch.empty(m, n, dtype=torch.float32)
        rc = self._run(
            x.data_ptr(), x.stride(0), m, panels.data_ptr(), n, k, y.data_ptr(), n,
            torch.get_num_threads(),
        )  # fmt: skip
        if rc != 0:
            raise ValueError("gemv: the kernel refused the shapes")
        return y


def unsupported_reason() -> str | None:
    """Why the float32 GEMV cannot run here, or None when it can."""
    missing = NEEDED - cpu_flags()
    if missing:
        return f"CPU lacks {', '.join(sorted(missing))}"
    if find_compiler() is None:
        return "no C compiler (cc or gcc) on PATH"
    return None


def build(cache_dir: Path) -> Path:
    """Compile the kernel into ``cache_dir`` unless it is there; return the library's path."""
    compiler = find_compiler()
    if compiler is None:
        raise RuntimeError("no C compiler (cc or gcc) on PATH")
    return compile_library(cache_dir, "avx2-kernels", SOURCES, HEADERS, FLAGS, compiler)


def load_gemv_f32(cache_dir: Path | None = None) -> NativeGemvF32 | None:
    """The kernel, built on first use, or None (reason logged) where it cannot run."""
    reason = unsupported_reason()
    if reason is None:
        try:
            return NativeGemvF32(build(cache_dir or default_cache_dir()))
        except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
            reason = str(exc)
    log.info("float32 native GEMV off (%s); float32 linears stay on PyTorch", reason)
    return None
