"""A decode-only step through every layer in one native call (``kernels/decode_step.c``).

The fused runner drives each layer as about ten calls from Python; for a decode step most of
them do microseconds of work, and their dispatch was about a fifth of the step. Where every
linear runs on the native GEMV (``GemvSwitch.on``) and the native kernels are loaded, the
runner hands a step that only decodes (no prompt segments) to ``NativeDecodeStep``, which runs
the same kernels in the same order in C: the results are the Python loop's, bit for bit.

On a CPU with AMX tiles, where oneDNN runs the linears (``GemvSwitch`` off) and decode
attention runs on the tiles (``native.AmxDecode``), decode-only steps can run here too, on the
tiles (``amx``): the linears on the same GEMV panels (``kernels/gemv_amx.c``) and attention on
``decode_attention_amx``, where the engine times that faster (``calibrate.amx_step_wins``).
Steps that carry prompt rows stay on oneDNN, so a decode row rounds apart in the two kinds of
step there, as oneDNN's GEMM already rounds a row by its step's size on such a CPU.

A float32 model (a CPU without AVX-512 BF16) runs ``decode_step_f32`` from the AVX2 library
(``kernels/decode_step_avx2.c``) on the float32 GEMV, pointwise and decode attention kernels
the Python loop calls there, again bit for bit.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Protocol

import torch

from engine.embedded.attention import StepPlan
from engine.embedded.linear import GemvLinear

_PTR, _I64, _INT, _F32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_float


class _Layer(ctypes.Structure):
    _fields_ = [
        (name, _PTR)
        for name in (
            "norm_in", "qkv", "qkv_bias", "o", "norm_post", "gate_up", "down", "keys", "values"
        )
    ]  # fmt: skip


class FusedLayer(Protocol):
    """What the step reads of a fused layer (``fused._Layer``)."""

    qkv: object
    o: object
    gate_up: object
    down: object
    norm_in: torch.Tensor
    norm_post: torch.Tensor


def runs_natively(layers: Sequence[FusedLayer]) -> bool:
    """Whether every linear of ``layers`` has GEMV panels (a weight the GEMV does not take
    stays on oneDNN, and then the step stays in Python)."""
    return all(isinstance(lin, GemvLinear) for layer in layers for lin in _linears(layer)) and all(
        layer.o.bias is None and layer.gate_up.bias is None for layer in layers
    )


def _linears(layer: FusedLayer) -> tuple[object, ...]:
    return layer.qkv, layer.o, layer.gate_up, layer.down


class NativeDecodeStep:
    """Runs a decode-only step of a fused runner's layers natively. Not thread-safe: the
    scheduler thread is its only user."""

    def __init__(
        self,
        library: str,
        layers: Sequence[FusedLayer],
        heads: tuple[int, int, int],
        intermediate: int,
        eps: float,
        scale: float,
        dtype: torch.dtype = torch.bfloat16,
    ) -> None:
        """``heads``: (query heads, KV heads, head size); ``layers`` must pass
        ``runs_natively``; ``dtype``: the model's (bfloat16: the AVX-512 library's step;
        float32: the AVX2 library's, whose linears still read bfloat16 panels)."""
        lib = ctypes.CDLL(library)
        if dtype not in (torch.bfloat16, torch.float32):
            raise ValueError("native decode step: a bfloat16 or float32 model")
        self.dtype = dtype
        fn = lib.decode_step if dtype == torch.bfloat16 else lib.decode_step_f32
        fn.argtypes = [_PTR, _INT, _PTR, _PTR] + [_INT] * 6 + [_PTR, _PTR, _I64, _PTR, _PTR]
        fn.argtypes += [_PTR, _INT, _INT, _INT, _F32, _F32, _INT, _INT]
        fn.restype = _INT
        self._fn = fn
        self.hq, self.hkv, self.head_dim = heads
        self.intermediate, self.eps, self.scale = intermediate, eps, scale
        self._table = (_Layer * len(layers))()
        self._keep: list[torch.Tensor] = []  # every tensor a table pointer points into
        for entry, layer in zip(self._table, layers, strict=True):
            qkv, o, gate_up, down = _linears(layer)
            entry.norm_in = self._ptr(layer.norm_in, dtype)
            entry.norm_post = self._ptr(layer.norm_post, dtype)
            entry.qkv, entry.o = self._ptr(qkv.panels), self._ptr(o.panels)
            entry.gate_up, entry.down = self._ptr(gate_up.panels), self._ptr(down.panels)
            entry.qkv_bias = self._ptr(qkv.bias, dtype) if qkv.bias is not None else None
        self._pool: tuple[int, ...] = ()
        self._rows = torch.empty(0, dtype=torch.int32)
        # on the AMX tiles (linears and attention), as the engine sets it once it has timed
        # them (``calibrate.amx_step_wins``); else the AVX-512 GEMV and decode attention
        self.amx = False

    def _ptr(self, t: torch.Tensor, dtype: torch.dtype = torch.bfloat16) -> int:
        """``t``'s address, kept alive with the table (GEMV panels are bfloat16 always)."""
        if t.dtype != dtype or not t.is_contiguous():
            raise ValueError(f"native decode step: weights must be contiguous {dtype}")
        self._keep.append(t)
        return t.data_ptr()

    def __call__(
        self, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, plan: StepPlan
    ) -> torch.Tensor:
        """Every layer over ``h`` ``[n, hidden]`` (updated in place: the residual stream),
        ``cos``/``sin`` ``[n, head_dim]`` the rows' rotary tables; stores each query's K/V in
        the pool and returns the last layer's MLP output (to add to ``h``)."""
        pool = plan.pool
        n, hidden = h.shape
        if plan.segments or plan.n_decode != n or plan.decoder is None:
            raise ValueError("native decode step: a step of decode queries only")
        if h.dtype != self.dtype or cos.dtype != self.dtype or pool.dtype != self.dtype:
            raise ValueError(f"native decode step: {self.dtype} rows, tables and pool")
        ptrs = tuple(t.data_ptr() for t in pool.keys + pool.values)
        if ptrs != self._pool:  # the pool grew (new tensors): point the table at them
            layers = len(self._table)
            for entry, k, v in zip(self._table, ptrs[:layers], ptrs[layers:], strict=True):
                entry.keys, entry.values = k, v
            self._pool = ptrs
        slots = plan.decode_slots
        if slots is None:
            if len(self._rows) < n:
                self._rows = torch.arange(max(n, 2 * len(self._rows)), dtype=torch.int32)
            rows = self._rows
        else:
            rows = slots
        pending = torch.empty_like(h)
        rc = self._fn(
            ctypes.addressof(self._table), len(self._table), h.data_ptr(), pending.data_ptr(), n,
            hidden, self.intermediate, self.hq, self.hkv, self.head_dim,
            cos.data_ptr(), sin.data_ptr(), cos.stride(0), rows.data_ptr(),
            plan.decode_lengths.data_ptr(), None if slots is None else slots.data_ptr(),
            plan.decode_shared, pool.keys[0].shape[0], pool.capacity,
            self.eps, self.scale, torch.get_num_threads(), int(self.amx),
        )  # fmt: skip
        if rc == -2:
            raise ValueError("native decode step: a pool row or length out of range")
        if rc != 0:
            raise RuntimeError("native decode step: a kernel refused the shapes")
        return pending
