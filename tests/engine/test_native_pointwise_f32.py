"""Residual add + RMSNorm in float32 on the AVX2 kernel (``kernels/pointwise_avx2.c``,
``pointwise_f32.py``), built for real: against float64 LlamaRMSNorm, the residual added in
place, a row the same bit for bit among any rows, and the calls it refuses."""

from __future__ import annotations

import pytest
import torch
from support.avx2_kernels import needs_avx2

from engine.embedded.pointwise_f32 import NativeNormF32

pytestmark = needs_avx2


@pytest.fixture(scope="module")
def norm(gemv_f32) -> NativeNormF32:  # noqa: ANN001
    return NativeNormF32(gemv_f32.library)


@pytest.mark.parametrize("rows", [1, 3, 64, 200])  # 64 rows on: split across threads
@pytest.mark.parametrize("with_delta", [True, False])
def test_matches_float64_rms_norm_and_adds_the_residual(
    norm: NativeNormF32, rows: int, with_delta: bool
) -> None:
    g = torch.Generator().manual_seed(rows)
    wide = torch.randn(rows, 1000, generator=g) * 3
    h = wide[:, 100:676]  # rows 1,000 apart, changed in place
    delta = torch.randn(rows, 576, generator=g) if with_delta else None
    weight = torch.randn(576, generator=g)
    summed = (h.double() + delta.double()) if delta is not None else h.double()
    want = summed * torch.rsqrt(summed.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.double()
    got = norm.add_rms_norm(h, delta, weight, 1e-5)
    assert (got.double() - want).abs().max() < 1e-5
    assert (h.double() - summed).abs().max() < 1e-6  # the residual stream holds h + delta
    alone = norm.add_rms_norm(h[rows - 1 :].clone(), None, weight, 1e-5)
    assert torch.equal(alone[0], got[rows - 1])


def test_calls_it_cannot_serve_are_refused(norm: NativeNormF32) -> None:
    h, w = torch.zeros(2, 64), torch.ones(64)
    with pytest.raises(ValueError, match="float32"):
        norm.add_rms_norm(h.bfloat16(), None, w, 1e-5)
    with pytest.raises(ValueError, match="residual"):
        norm.add_rms_norm(h, torch.zeros(3, 64), w, 1e-5)
    with pytest.raises(ValueError, match="multiple of 8"):
        norm.add_rms_norm(torch.zeros(2, 60), None, torch.ones(60), 1e-5)
    with pytest.raises(ValueError, match="weight per column"):
        norm.add_rms_norm(h, None, torch.ones(32), 1e-5)
    assert norm.add_rms_norm(torch.zeros(0, 64), None, w, 1e-5).shape == (0, 64)
