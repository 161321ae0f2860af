"""Linear layers on weights prepacked once into oneDNN's blocked layout.

``F.linear`` hands oneDNN a plain row-major weight on every call. For a decode step (a few
token rows against each weight matrix, so bound by reading the weights from memory) that runs
at 10-14 GB/s on this project's 2-core Zen 4 VM, while the same product on a weight reordered
once into oneDNN's own layout runs at 16-22 GB/s (measured with the model's shapes, every
weight cold in cache). Prefill GEMMs gain 3-6%. Where the native kernels load and the engine
times the native linear faster (not where oneDNN runs on AMX tiles: ``GemvSwitch``), every
step runs on it instead; it reads the weights at 25-37 GB/s (``gemv.py``).

The packed copies sit beside the original (transformers' forward and the tied embedding still
read that), each about the size of the model's linear weights again. Packing is used for
bfloat16, where oneDNN's AVX-512 BF16 kernels apply, and for float32 only under speculative
decoding (``packing_helps_drafts``) or where the float32 GEMV runs (``gemv_f32.py``: it keeps
oneDNN's copy until the engine has timed both); a PyTorch build without the op, or one that
fails a probe, keeps ``F.linear``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
import torch.nn.functional as F

from engine.embedded.gemv import GemvSwitch, NativeGemv

log = logging.getLogger(__name__)

Linear = Callable[[torch.Tensor], torch.Tensor]
# oneDNN picks its blocking for this many rows; any row count is computed correctly
PACK_ROWS_HINT = 512


def packing_available(dtype: torch.dtype) -> bool:
    """True when prepacked linears run here for ``dtype`` (probed once per call: cheap)."""
    if dtype != torch.bfloat16:
        return False
    return _packing_works(dtype)


def packing_helps_drafts(dtype: torch.dtype) -> bool:
    """float32 under speculative decoding: a verify step runs a few rows per request, and
    ``F.linear`` in float32 costs about twice as much for 2-5 rows as for 1, while the
    prepacked product costs 1.2-1.4x (the full model, 1-4 drafts, measured on a 2-core Xeon
    without AVX-512 BF16). bfloat16 is packed anyway (``packing_available``)."""
    return dtype == torch.float32 and _packing_works(dtype)


def _packing_works(dtype: torch.dtype) -> bool:
    if not torch.backends.mkldnn.is_available():
        return False
    ops = torch.ops.mkldnn
    if not (hasattr(ops, "_reorder_linear_weight") and hasattr(ops, "_linear_pointwise")):
        return False
    try:
        w = torch.randn(64, 32).to(dtype)
        x = torch.randn(3, 32).to(dtype)
        packed = ops._reorder_linear_weight(w, PACK_ROWS_HINT)
        got = ops._linear_pointwise(x, packed, None, "none", [], "")
        return bool(torch.allclose(got.float(), F.linear(x, w).float(), atol=1e-2, rtol=1e-2))
    except (RuntimeError, TypeError) as exc:
        log.info("prepacked linear weights unavailable: %s", exc)
        return False


def make_linear(
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    pack: bool,
    gemv: NativeGemv | None = None,
    switch: GemvSwitch | None = None,
) -> Linear:
    """``x -> x @ weight.T + bias``, on a prepacked copy of ``weight`` when ``pack``; with
    ``gemv`` (and a weight it fits), on the native linear's own packed copy instead while
    ``switch.on`` (read at each call; default on), for steps of every size."""
    if not pack:
        return lambda x: F.linear(x, weight, bias)
    packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), PACK_ROWS_HINT)
    op = torch.ops.mkldnn._linear_pointwise
    if gemv is None or not gemv.fits(weight):
        return lambda x: op(x, packed, bias, "none", [], "")
    return GemvLinear(gemv, weight, bias, packed, switch or GemvSwitch())


class GemvLinear:
    """A linear on the native GEMV's panels while ``switch.on``, else on oneDNN's prepacked
    copy (until ``drop_fallback``). ``panels`` and ``bias`` are public: the native decode step
    (``decode_step.py``) runs the same product on them without a call per linear."""

    def __init__(
        self,
        gemv: NativeGemv,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        packed: torch.Tensor,
        switch: GemvSwitch,
    ) -> None:
        self.gemv, self.bias, self.switch = gemv, bias, switch
        self.packed: torch.Tensor | None = packed
        # built only for a weight ``gemv.fits`` (``make_linear``)
        self.panels, self.outputs = gemv.pack(weight, checked=True), weight.shape[0]
        self.weight_bytes = weight.numel() * weight.element_size()  # oneDNN's copy, about

    def drop_fallback(self) -> None:
        """Free oneDNN's copy (the weight's size again) once the engine has settled on the
        GEMV for good; the linear then refuses to run with ``switch`` off."""
        if not self.switch.on:
            raise RuntimeError("linear: oneDNN's copy is in use (the GEMV is switched off)")
        self.packed = None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if not self.switch.on:
            if self.packed is None:
                raise RuntimeError("linear: the GEMV is switched off and oneDNN's copy is freed")
            return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")
        if not x.shape[0]:
            return x.new_empty((0, self.outputs))
        y = self.gemv(x, self.panels, self.outputs)
        return y if self.bias is None else y.add_(self.bias)
