"""The native kernels (``kernels/*.c``): compiled once per machine with the system C compiler,
loaded with ctypes.

- Prefill: PyTorch's CPU flash attention computes bfloat16 attention at about a third of the
  speed the AVX-512 BF16 dot-product instruction allows (measured on this project's 2-core
  Zen 4 VM: 26 ms against 10 ms for one layer of a 1,550-token causal prefill, 9 query heads
  over 3 KV heads). Attention is about 40% of a long prefill for a small model. On a CPU
  with AMX tiles SDPA runs on them and beats that kernel 3x, so there is a second kernel on
  the tiles (``attention_amx.c``: 2.8 ms against SDPA's 4.4 ms for that layer, on a 2-core
  Xeon); the engine times all three when it loads (``calibrate.py``).
- Decode: a decode step is bound by memory reads, and most of what it reads is KV. Rows that
  share a prompt prefix (a system prompt, the same documents) hold identical KV for it; the
  kernel reads that prefix once for all rows instead of once per row.
- Pointwise (``pointwise.c``): residual add + RMSNorm, and SiLU-gate, one pass each instead of
  PyTorch's chains of small ops (most of a single-row decode step's overhead).

``load_native_kernels`` returns ``None`` (the engine keeps PyTorch's attention) when the
CPU lacks the instructions, when PyTorch runs below AVX-512 (``ATEN_CPU_CAPABILITY=avx2``, the
portable path), or when no compiler is found; the reason is logged. The library is built once
per machine and cached (``cbuild.py``).
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import subprocess
from pathlib import Path

import torch

from engine.embedded.cbuild import (
    cannot_build,
    compile_library,
    compiler_accepts,
    cpu_flags,
    find_compiler,
)

log = logging.getLogger(__name__)

KERNELS = Path(__file__).with_name("kernels")
SOURCES = (KERNELS / "attention.c", KERNELS / "pointwise.c", KERNELS / "gemv.c")
SOURCES += (KERNELS / "gemv_pack.c",)
SOURCES += (KERNELS / "attention_amx.c", KERNELS / "decode_step.c", KERNELS / "gemv_amx.c")
HEADERS = (KERNELS / "vec.h", KERNELS / "kv_pack.h", KERNELS / "kernels.h", KERNELS / "gemv_pack.h")
HEADERS += (KERNELS / "decode_items.h", KERNELS / "amx_tiles.h", KERNELS / "decode_step_body.h")
# -fopenmp: the library binds to the libgomp PyTorch has loaded (same soname): one thread team
FLAGS = ("-O3", "-shared", "-fPIC", "-fopenmp")
FLAGS += ("-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512bf16", "-mfma")
# AMX only in attention_amx.c's intrinsics, run only where the CPU has it; added where the
# compiler takes them (GCC 11 and Clang 12 on), else that kernel builds as a stub
AMX_FLAGS = ("-mamx-tile", "-mamx-bf16")
# CPU flags (as /proc/cpuinfo spells them) the kernel's instructions need
NEEDED = frozenset({"avx512f", "avx512bw", "avx512vl", "avx512_bf16", "fma"})
HEAD_DIMS = (64, 128)
AMX_NEEDED = frozenset({"amx_tile", "amx_bf16"})
AMX_HEAD_DIM = 64  # the AMX prefill's only head size

_I64, _INT, _PTR = ctypes.c_int64, ctypes.c_int, ctypes.c_void_p


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "appliance" / "kernels"


def unsupported_reason() -> str | None:
    """Why the kernel cannot run here, or None when it can."""
    reason = cannot_build(NEEDED)
    if reason is None and "AVX512" not in torch.backends.cpu.get_cpu_capability():
        return "PyTorch runs below AVX-512 (ATEN_CPU_CAPABILITY)"
    return reason


def build(cache_dir: Path) -> Path:
    """Compile the kernel into ``cache_dir`` unless it is there; return the library's path.
    Raises ``RuntimeError`` with the compiler's message when the build fails."""
    compiler = find_compiler()
    if compiler is None:
        raise RuntimeError("no C compiler (cc or gcc) on PATH")
    flags = FLAGS + (AMX_FLAGS if compiler_accepts(compiler, AMX_FLAGS) else ())
    return compile_library(cache_dir, "kernels", SOURCES, HEADERS, flags, compiler)


class NativeKernels:
    """Prefill and decode attention over the slot KV pool, and the runner's pointwise ops
    (bfloat16 only)."""

    name = "avx512-bf16"

    def __init__(self, library: Path) -> None:
        lib = ctypes.CDLL(str(library))
        prefill = lib.prefill_attention
        prefill.argtypes = [_PTR, _I64, _I64, _PTR, _PTR, _I64, _PTR, _I64, _I64]
        prefill.argtypes += [_INT] * 5 + [ctypes.c_float, _INT]
        prefill.restype = _INT
        decode = lib.decode_attention
        decode.argtypes = [_PTR, _I64, _I64, _PTR, _PTR, _I64, _I64, _INT, _INT]
        decode.argtypes += [_PTR, _PTR, _INT, _PTR]
        decode.argtypes += [_I64, _I64]
        decode.argtypes += [_INT] * 4 + [ctypes.c_float, _INT]
        decode.restype = _INT
        add_rms = lib.add_rms_norm
        add_rms.argtypes = [_PTR, _I64, _PTR, _I64, _PTR, _PTR, _I64, _INT, _INT]
        add_rms.argtypes += [ctypes.c_float, _INT]
        silu_mul = lib.silu_mul
        silu_mul.argtypes = [_PTR, _I64, _PTR, _I64, _INT, _INT, _INT]
        rope = lib.rope_inplace
        rope.argtypes = [_PTR, _I64, _PTR, _PTR, _I64, _INT, _INT, _INT, _INT]
        for fn in (add_rms, silu_mul, rope):
            fn.restype = _INT
        amx = lib.prefill_attention_amx
        amx.argtypes, amx.restype = prefill.argtypes, _INT
        self._prefill, self._decode, self._prefill_amx = prefill, decode, amx
        decode_amx = lib.decode_attention_amx
        decode_amx.argtypes, decode_amx.restype = decode.argtypes, _INT
        self._decode_amx = decode_amx
        amx_linear = lib.gemv_amx
        amx_linear.argtypes = [_PTR, _I64, _INT, _PTR, _INT, _INT, _PTR, _I64, _INT]
        amx_linear.restype = _INT
        self._amx_linear = amx_linear
        # the AMX prefill runs where the CPU has the tiles, the compiler built it, and Linux
        # grants the tiles (checked per call)
        built = lib.amx_built
        built.argtypes, built.restype = [], _INT
        self.amx = cpu_flags() >= AMX_NEEDED and built() == 1
        self._add_rms, self._silu_mul, self._rope = add_rms, silu_mul, rope
        self.library = library

    def supports(self, dtype: torch.dtype, head_dim: int) -> bool:
        return dtype == torch.bfloat16 and head_dim in HEAD_DIMS

    def amx_prefill_supports(self, head_dim: int) -> bool:
        """Whether ``prefill(..., amx=True)`` and ``decode(..., amx=True)`` can run here for
        this head size."""
        return self.amx and head_dim == AMX_HEAD_DIM

    def prefill(
        self,
        query: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        out: torch.Tensor,
        start: int,
        scale: float,
        amx: bool = False,
    ) -> None:
        """``query`` ``[Hq, n, D]`` (rows at ``start .. start + n - 1``), ``keys``/``values``
        ``[Hkv, >= start + n, D]`` holding the slot's KV up to the segment's end, ``out``
        ``[n, Hq, D]``; any strides with a contiguous last dimension. Writes ``out``. ``amx``:
        on the AMX tiles (``amx_prefill_supports``), else on AVX-512."""
        hq, n, dim = query.shape
        hkv = keys.shape[0]
        _check_layout(query, keys, values, out)
        if keys.shape[1] < start + n or out.shape != (n, hq, dim):
            raise ValueError("attention kernel: shapes do not match the segment")
        rc = (self._prefill_amx if amx else self._prefill)(
            query.data_ptr(), query.stride(1), query.stride(0),
            keys.data_ptr(), values.data_ptr(), keys.stride(0),
            out.data_ptr(), out.stride(0), out.stride(1),
            n, start, hq, hkv, dim, scale, torch.get_num_threads(),
        )  # fmt: skip
        _raise_for(rc)

    def amx_linear(self, x: torch.Tensor, panels: torch.Tensor, n: int) -> torch.Tensor:
        """``x`` ``[m, k]`` bfloat16 (contiguous rows, k a multiple of 32) times the weight
        the native GEMV's ``panels`` pack (``n`` outputs), on the AMX tiles
        (``amx_prefill_supports``): ``[m, n]``. Each row's products run in the same order
        whatever ``m`` is; they round apart from the GEMV's and from oneDNN's."""
        m, k = x.shape
        if x.dtype != torch.bfloat16 or x.stride(1) != 1 or panels.numel() != n * k:
            raise ValueError("amx linear: x must be [m, k] bfloat16 rows matching the weight")
        y = torch.empty(m, n, dtype=torch.bfloat16)
        rc = self._amx_linear(
            x.data_ptr(), x.stride(0), m, panels.data_ptr(), n, k, y.data_ptr(), n,
            torch.get_num_threads(),
        )  # fmt: skip
        if rc == -1:
            raise ValueError("amx linear: the kernel refused the shapes (k % 32, n % 32)")
        _raise_for(rc)
        return y

    def decode(
        self,
        query: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        lengths: torch.Tensor,
        shared: int,
        out: torch.Tensor,
        scale: float,
        slots: torch.Tensor | None = None,
        amx: bool = False,
    ) -> None:
        """``n`` single-token queries over the pool: ``query`` ``[n, Hq, D]``, ``keys``/``values``
        the layer's pool ``[slots, Hkv, capacity, D]`` (the new tokens' KV already stored),
        ``lengths`` ``[n]`` int32 (the keys each query sees, itself included); ``slots`` ``[n]``
        int32, the pool row each query reads (default: query r reads row r; a request's
        speculative drafts read its row, each up to itself); ``shared``: positions ``0 ..
        shared - 1`` hold the same tokens in every row read (read once, from row 0); ``out``
        ``[n, Hq, D]``. Writes ``out``. ``amx``: on the AMX tiles (``amx_prefill_supports``),
        whose products round differently from AVX-512's: an engine runs every decode step on
        one of the two."""
        n, hq, dim = query.shape
        _check_layout(query, keys[0], values[0], out)
        check_decode_indices(n, lengths, slots)
        if (
            keys.shape != values.shape
            or keys.stride(0) != values.stride(0)
            or out.shape != query.shape
        ):
            raise ValueError("attention kernel: shapes do not match the decode rows")
        # the rows and lengths are range-checked by the kernel, in its own pass over them: no
        # tensor reductions here, where they would run in every layer of every step
        rc = (self._decode_amx if amx else self._decode)(
            query.data_ptr(), query.stride(0), query.stride(1),
            keys.data_ptr(), values.data_ptr(), keys.stride(0), keys.stride(1),
            keys.shape[0], keys.shape[2],
            lengths.data_ptr(), None if slots is None else slots.data_ptr(), shared,
            out.data_ptr(), out.stride(0), out.stride(1),
            n, hq, keys.shape[1], dim, scale, torch.get_num_threads(),
        )  # fmt: skip
        if rc == -2:
            raise ValueError("attention kernel: a pool row, length or shared prefix out of range")
        _raise_for(rc)

    def add_rms_norm(
        self, h: torch.Tensor, delta: torch.Tensor | None, weight: torch.Tensor, eps: float
    ) -> torch.Tensor:
        """``h += delta`` in place (when given), then LlamaRMSNorm of ``h``; ``[n, dim]``
        bfloat16 with contiguous rows, ``weight`` ``[dim]``. Returns the normalised rows."""
        n, dim = h.shape
        _check_rows(h, delta, weight)
        if dim % 16 or weight.shape != (dim,) or not weight.is_contiguous():
            raise ValueError("native kernels: RMSNorm over a multiple of 16 with its weight")
        if delta is not None and delta.shape != h.shape:
            raise ValueError("native kernels: the residual must match the hidden states")
        out = torch.empty_like(h, memory_format=torch.contiguous_format)
        rc = self._add_rms(
            h.data_ptr(), h.stride(0),
            delta.data_ptr() if delta is not None else None,
            delta.stride(0) if delta is not None else 0,
            weight.data_ptr(), out.data_ptr(), out.stride(0),
            n, dim, eps, torch.get_num_threads(),
        )  # fmt: skip
        if rc != 0:
            raise RuntimeError("native kernels: RMSNorm refused the shape")
        return out

    def silu_mul(self, gate_up: torch.Tensor) -> torch.Tensor:
        """``silu(gate) * up`` for ``gate_up`` ``[n, 2 * half]`` (gate first), bfloat16."""
        n, width = gate_up.shape
        _check_rows(gate_up)
        if width % 32:
            raise ValueError("native kernels: SiLU-gate over a multiple of 32")
        out = gate_up.new_empty((n, width // 2))
        rc = self._silu_mul(
            gate_up.data_ptr(), gate_up.stride(0), out.data_ptr(), out.stride(0),
            n, width // 2, torch.get_num_threads(),
        )  # fmt: skip
        if rc != 0:
            raise RuntimeError("native kernels: SiLU-gate refused the shape")
        return out

    def rope_(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Rotary embedding in place: ``x`` ``[n, heads, dim]`` (rows may be strided, heads
        contiguous), ``cos``/``sin`` ``[n, dim]``; all bfloat16. Returns ``x``."""
        n, heads, dim = x.shape
        _check_rows(cos, sin)
        if x.dtype != torch.bfloat16 or x.stride(2) != 1 or x.stride(1) != dim:
            raise ValueError("native kernels: rotary over bfloat16 [n, heads, dim] rows")
        if cos.shape != (n, dim) or sin.shape != (n, dim) or cos.stride() != sin.stride():
            raise ValueError("native kernels: cos and sin must be [n, dim] alike")
        rc = self._rope(
            x.data_ptr(), x.stride(0), cos.data_ptr(), sin.data_ptr(), cos.stride(0),
            n, heads, dim, torch.get_num_threads(),
        )  # fmt: skip
        if rc != 0:
            raise RuntimeError("native kernels: rotary refused the shape")
        return x


class AmxDecode:
    """Decode attention on the AMX tiles (``NativeKernels.decode(..., amx=True)``): the
    ``DecodeKernel`` a step plan runs decode queries on where the engine found it faster than
    the AVX-512 kernel (``calibrate.decode_on_amx``)."""

    name = "amx"

    def __init__(self, kernels: NativeKernels) -> None:
        self.kernels = kernels
        # the ``DecodeKernel`` call: ``NativeKernels.decode`` with ``amx`` set
        self.decode = functools.partial(kernels.decode, amx=True)


def _raise_for(rc: int) -> None:
    """The error a kernel's nonzero return code stands for (none for 0)."""
    if rc == -3:
        raise RuntimeError("attention kernel: Linux did not grant this process AMX tiles")
    if rc == -4:
        raise RuntimeError("attention kernel: built by a compiler without AMX support")
    if rc != 0:
        raise RuntimeError("attention kernel: unsupported shape or out of memory")


def check_decode_indices(n: int, lengths: torch.Tensor, slots: torch.Tensor | None) -> None:
    """Decode attention's per-query ``lengths`` (and ``slots``): ``n`` contiguous int32 each.
    Their values are range-checked by the kernels, in their own pass over them."""
    for name, ints in (("lengths", lengths), ("slots", slots)):
        if ints is not None and (
            ints.dtype != torch.int32 or not ints.is_contiguous() or len(ints) != n
        ):
            raise ValueError(f"attention kernel: {name} must be n contiguous int32")


def _check_rows(*tensors: torch.Tensor | None) -> None:
    for t in tensors:
        if t is not None and (t.dtype != torch.bfloat16 or t.dim() > 2 or t.stride(-1) != 1):
            raise ValueError("native kernels: bfloat16 rows with a contiguous last dim")


def _check_layout(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, out: torch.Tensor):  # noqa: ANN202
    """The C side reads raw pointers: check every layout assumption it makes (``keys`` and
    ``values`` of one slot: ``[Hkv, L, D]``)."""
    for t in (query, keys, values, out):
        if t.dtype != torch.bfloat16 or t.stride(-1) != 1:
            raise ValueError("attention kernel: bfloat16 tensors with a contiguous last dim")
    if keys.stride() != values.stride() or keys.stride(1) != keys.shape[-1]:
        raise ValueError("attention kernel: keys and values must be [Hkv, L, D] row-major")


def load_native_kernels(cache_dir: Path | None = None) -> NativeKernels | None:
    """The kernels, built on first use, or None (reason logged) where they cannot run."""
    reason = unsupported_reason()
    if reason is None:
        try:
            return NativeKernels(build(cache_dir or default_cache_dir()))
        except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
            reason = str(exc)
    log.info("native attention off (%s); using PyTorch attention", reason)
    return None
