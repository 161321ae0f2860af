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

import logging
import subprocess
from pathlib import Path

import torch

from engine.embedded.cbuild import cannot_build, compile_library, find_compiler
from engine.embedded.gemv import PANEL_OUTPUTS, NativeGemv
from engine.embedded.native import KERNELS, default_cache_dir

log = logging.getLogger(__name__)

# one library: the linear, decode and prefill attention (``attention_f32.py``), RMSNorm,
# SiLU-gate and rotary (``pointwise_f32.py``) and the decode step (``decode_step.py``)
SOURCES = (KERNELS / "gemv_avx2.c", KERNELS / "gemv_pack.c", KERNELS / "attention_avx2.c")
SOURCES += (KERNELS / "prefill_avx2.c", KERNELS / "pointwise_avx2.c")
SOURCES += (KERNELS / "decode_step_avx2.c",)
HEADERS = (KERNELS / "gemv_pack.h", KERNELS / "vec_avx2.h", KERNELS / "kernels_avx2.h")
HEADERS += (KERNELS / "decode_step_body.h",)
FLAGS = ("-O3", "-shared", "-fPIC", "-fopenmp", "-mavx2", "-mfma")
NEEDED = frozenset({"avx2", "fma"})


class NativeGemvF32(NativeGemv):
    """Packs weights for, and runs, the float32 linear on bfloat16 panels."""

    PRODUCT = "gemv_f32_bf16"
    DTYPE = torch.float32
    name = "avx2"

    @staticmethod
    def fits(weight: torch.Tensor) -> bool:
        """``weight`` ``[n, k]`` is float32, n a multiple of 32, k even, and every value is
        exactly a bfloat16 (else its product would not be the model's)."""
        n, k = weight.shape
        if weight.dtype != torch.float32 or n % PANEL_OUTPUTS or k % 2 or k <= 0:
            return False
        return bool(torch.equal(weight.detach().bfloat16().float(), weight.detach()))


def unsupported_reason() -> str | None:
    """Why the float32 GEMV cannot run here, or None when it can."""
    return cannot_build(NEEDED)


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
