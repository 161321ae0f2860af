"""The float32 pointwise kernels on AVX2 (``kernels/pointwise_avx2.c``, ``pointwise_f32.py``),
built for real: residual add + RMSNorm against float64 LlamaRMSNorm with the residual added in
place, SiLU-gate and rotary embedding against PyTorch's, a row the same bit for bit among any
rows, and the calls they refuse."""

from __future__ import annotations

import pytest
import torch
from support.avx2_kernels import needs_avx2

from engine.embedded.fused import _rope
from engine.embedded.pointwise_f32 import NativePointwiseF32

pytestmark = needs_avx2


@pytest.fixture(scope="module")
def norm(gemv_f32) -> NativePointwiseF32:  # noqa: ANN001
    return NativePointwiseF32(gemv_f32.library)


@pytest.mark.parametrize("rows", [1, 3, 64, 200])  # 64 rows on: split across threads
@pytest.mark.parametrize("with_delta", [True, False])
def test_matches_float64_rms_norm_and_adds_the_residual(
    norm: NativePointwiseF32, rows: int, with_delta: bool
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


def test_calls_it_cannot_serve_are_refused(norm: NativePointwiseF32) -> None:
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


@pytest.mark.parametrize("rows", [1, 5, 200])
def test_silu_gate_matches_pytorch(norm: NativePointwiseF32, rows: int) -> None:
    g = torch.Generator().manual_seed(rows + 1)
    gate_up = torch.randn(rows, 2 * 1536, generator=g) * 6
    gate_up[0, :4] = torch.tensor([-120.0, -90.0, 90.0, 0.0])  # far tails of e^-g
    gate, up = gate_up.chunk(2, dim=-1)
    want = torch.nn.functional.silu(gate.double()) * up.double()
    got = norm.silu_mul(gate_up)
    assert got.shape == (rows, 1536)
    assert ((got.double() - want).abs() <= 1e-6 * (1 + want.abs())).all()
    assert torch.equal(norm.silu_mul(gate_up[rows - 1 :].clone())[0], got[rows - 1])
    with pytest.raises(ValueError, match="float32"):
        norm.silu_mul(gate_up.bfloat16())


@pytest.mark.parametrize("rows", [1, 7, 200])
def test_rotary_matches_pytorch_in_place(norm: NativePointwiseF32, rows: int) -> None:
    """Over the q and k heads of a fused qkv row (rows strided, as the runner's view)."""
    g = torch.Generator().manual_seed(rows + 2)
    qkv = torch.randn(rows, 960, generator=g)
    qk = qkv[:, :768].view(rows, 12, 64)
    angles = torch.rand(rows, 32, generator=g) * 100
    cos = torch.cat((angles.cos(), angles.cos()), -1)
    sin = torch.cat((angles.sin(), angles.sin()), -1)
    want = _rope(qk.double(), cos.double().unsqueeze(1), sin.double().unsqueeze(1))
    v_before = qkv[:, 768:].clone()
    got = norm.rope_(qk, cos, sin)
    assert got.data_ptr() == qkv.data_ptr()  # in place
    assert (got.double() - want).abs().max() < 1e-5
    assert torch.equal(qkv[:, 768:], v_before)  # the v heads untouched
    with pytest.raises(ValueError, match="multiple of 16"):
        norm.rope_(torch.zeros(2, 3, 8), torch.zeros(2, 8), torch.zeros(2, 8))
    with pytest.raises(ValueError, match="alike"):
        norm.rope_(torch.zeros(2, 3, 64), torch.zeros(2, 64), torch.zeros(3, 64))
