"""Float32 attention on the AVX2 kernels, for CPUs without AVX-512 BF16, where the engine runs
in float32 and the AVX-512 kernels do not load.

- Decode (``kernels/attention_avx2.c``) takes the decode queries of a step as the AVX-512
  kernel does (``NativeKernels.decode``): each over its own pool row up to itself, drafts
  included, so ``attend`` hands it the same arguments. Every query reads a prompt prefix the
  decoding rows share from pool row 0's copy (the rows hold the same values: a prompt's KV
  is computed alike on every path), where it stays in cache for the others.
- Prefill (``kernels/prefill_avx2.c``) takes a prompt segment as ``NativeKernels.prefill``
  does. A query's result does not depend on how its prompt is cut into steps, so a prompt's KV
  is the same cold, in pieces beside other requests, or after a cached prefix.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import torch

from engine.embedded.native import check_decode_indices

_PTR, _I64, _INT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int


class NativeDecodeF32:
    """Decode attention over a float32 KV pool (from the AVX2 library, ``gemv_f32.py``)."""

    name = "avx2"

    def __init__(self, library: Path) -> None:
        fn = ctypes.CDLL(str(library)).decode_attention_f32
        fn.argtypes = [_PTR, _I64, _I64, _PTR, _PTR, _I64, _I64, _INT, _INT, _PTR, _PTR, _INT]
        fn.argtypes += [_PTR, _I64, _I64] + [_INT] * 4 + [ctypes.c_float, _INT]
        fn.restype = _INT
        self._fn = fn

    @staticmethod
    def supports(dtype: torch.dtype, head_dim: int) -> bool:
        return dtype == torch.float32 and head_dim % 8 == 0 and 8 <= head_dim <= 256

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
    ) -> None:
        """As ``NativeKernels.decode``, in float32: ``query``/``out`` ``[n, Hq, D]``,
        ``keys``/``values`` ``[slots, Hkv, capacity, D]``, ``lengths`` (and ``slots``) ``[n]``
        int32; the decoding rows' first ``shared`` positions hold the same tokens, read from
        pool row 0 (every length must pass it when there are several queries). Writes
        ``out``."""
        n, hq, dim = query.shape
        for t in (query, keys, values, out):
            if t.dtype != torch.float32 or t.stride(-1) != 1:
                raise ValueError("attention kernel: float32 tensors with a contiguous last dim")
        check_decode_indices(n, lengths, slots)
        if (
            keys.shape != values.shape
            or keys.stride() != values.stride()
            or keys.stride(2) != dim
            or keys.shape[3] != dim
            or out.shape != query.shape
        ):
            raise ValueError("attention kernel: shapes do not match the decode rows")
        rc = self._fn(
            query.data_ptr(), query.stride(0), query.stride(1),
            keys.data_ptr(), values.data_ptr(), keys.stride(0), keys.stride(1),
            keys.shape[0], keys.shape[2],
            lengths.data_ptr(), None if slots is None else slots.data_ptr(), shared,
            out.data_ptr(), out.stride(0), out.stride(1),
            n, hq, keys.shape[1], dim, scale, torch.get_num_threads(),
        )  # fmt: skip
        if rc == -2:
            raise ValueError("attention kernel: a pool row or length out of range")
        if rc != 0:
            raise RuntimeError("attention kernel: unsupported shape or out of memory")


class NativePrefillF32:
    """Causal prefill attention over a float32 slot's KV (from the AVX2 library,
    ``gemv_f32.py``); a ``PrefillKernel``."""

    name = "avx2"

    def __init__(self, library: Path) -> None:
        fn = ctypes.CDLL(str(library)).prefill_attention_f32
        fn.argtypes = [_PTR, _I64, _I64, _PTR, _PTR, _I64, _PTR, _I64, _I64]
        fn.argtypes += [_INT] * 5 + [ctypes.c_float, _INT]
        fn.restype = _INT
        self._fn = fn

    @staticmethod
    def supports(dtype: torch.dtype, head_dim: int) -> bool:
        return dtype == torch.float32 and head_dim % 16 == 0 and 16 <= head_dim <= 256

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
        """As ``NativeKernels.prefill``, in float32: ``query`` ``[Hq, n, D]`` (rows at
        ``start .. start + n - 1``), ``keys``/``values`` ``[Hkv, >= start + n, D]``, ``out``
        ``[n, Hq, D]``; any strides with a contiguous last dimension. Writes ``out``. There
        are no AMX tiles on this path: ``amx`` must be False."""
        if amx:
            raise ValueError("attention kernel: the float32 prefill has no AMX path")
        hq, n, dim = query.shape
        for t in (query, keys, values, out):
            if t.dtype != torch.float32 or t.stride(-1) != 1:
                raise ValueError("attention kernel: float32 tensors with a contiguous last dim")
        if keys.stride() != values.stride() or keys.stride(1) != dim or keys.shape != values.shape:
            raise ValueError("attention kernel: keys and values must be [Hkv, L, D] row-major")
        if keys.shape[1] < start + n or keys.shape[2] != dim or out.shape != (n, hq, dim):
            raise ValueError("attention kernel: shapes do not match the segment")
        rc = self._fn(
            query.data_ptr(), query.stride(1), query.stride(0),
            keys.data_ptr(), values.data_ptr(), keys.stride(0),
            out.data_ptr(), out.stride(0), out.stride(1),
            n, start, hq, keys.shape[0], dim, scale, torch.get_num_threads(),
        )  # fmt: skip
        if rc != 0:
            raise RuntimeError("attention kernel: unsupported shape or out of memory")
