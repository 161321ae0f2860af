"""The float32 linear on bfloat16 panels (``kernels/gemv_avx2.c``, ``gemv_f32.py``), built for
real: against float64 products, each row the same bit for bit however many rows share the call
(both of its paths), the weights it refuses, and the fused runner on it against transformers'
own float32 forward."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from support.avx2_kernels import needs_avx2

from engine.embedded.gemv_f32 import NativeGemvF32

pytestmark = needs_avx2


def bf16_exact(*shape: int, seed: int) -> torch.Tensor:
    """float32 values that bfloat16 holds exactly, as a bfloat16 model's weights in float32."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).bfloat16().float()


def assert_close(got: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> None:
    want = x.double() @ w.double().T
    # float32 chains of k products: relative to the sum of magnitudes
    bound = 1e-5 * (x.double().abs() @ w.double().abs().T) + 1e-6
    assert got.dtype == torch.float32 and got.shape == want.shape
    assert ((got.double() - want).abs() <= bound).all()


# 1-8 rows take the narrow passes, more the widened prompt path; k = 770 leaves a short last
# chunk of the prompt path (256 k a chunk) and k = 1536 is SmolLM2's MLP width
@pytest.mark.parametrize("rows", [1, 2, 3, 4, 7, 8, 9, 13, 64, 200])
@pytest.mark.parametrize("k", [64, 770, 1536])
def test_any_row_count_matches_float64(gemv_f32: NativeGemvF32, rows: int, k: int) -> None:
    w = bf16_exact(96, k, seed=k)
    x = torch.randn(rows, k, generator=torch.Generator().manual_seed(rows))
    assert_close(gemv_f32(x, gemv_f32.pack(w), 96), x, w)


def test_a_row_is_computed_alike_whatever_shares_its_call(gemv_f32: NativeGemvF32) -> None:
    """The decode invariant the engine relies on (``GemvSwitch``): a row's result is bit for bit
    the same alone, among a few decode rows, and inside a prompt-sized call."""
    w = bf16_exact(3072, 576, seed=1)
    panels = gemv_f32.pack(w)
    wide = torch.randn(300, 1000, generator=torch.Generator().manual_seed(2))
    x = wide[:, 100:676]  # rows 1,000 apart: read in place
    alone = torch.cat([gemv_f32(x[i : i + 1], panels, 3072) for i in range(0, 300, 37)])
    for rows in (2, 3, 5, 8, 9, 17, 300):
        got = gemv_f32(x[:rows], panels, 3072)
        picked = [i for i in range(0, 300, 37) if i < rows]
        assert torch.equal(got[picked], alone[: len(picked)]), rows
    assert_close(alone, x[0:300:37], w)


def test_weights_it_does_not_take_are_refused(gemv_f32: NativeGemvF32) -> None:
    assert gemv_f32.fits(bf16_exact(64, 64, seed=3))
    assert not gemv_f32.fits(torch.randn(64, 64))  # values bfloat16 would round: not the model's
    assert not gemv_f32.fits(bf16_exact(48, 64, seed=3))  # 48 outputs
    assert not gemv_f32.fits(bf16_exact(64, 63, seed=3))  # odd k
    assert not gemv_f32.fits(torch.zeros(64, 64, dtype=torch.bfloat16))  # a bfloat16 weight
    with pytest.raises(ValueError, match="gemv"):
        gemv_f32.pack(torch.randn(64, 64))
    panels = gemv_f32.pack(torch.zeros(64, 64))
    assert panels.dtype == torch.bfloat16 and panels.numel() == 64 * 64
    with pytest.raises(ValueError, match="gemv"):
        gemv_f32(torch.zeros(2, 32), panels, 64)  # k does not match
    with pytest.raises(ValueError, match="gemv"):
        gemv_f32(torch.zeros(2, 64, dtype=torch.bfloat16), panels, 64)  # bfloat16 rows


def test_fused_runner_on_it_matches_transformers_float32(
    gemv_f32: NativeGemvF32, model_dir: Path
) -> None:
    """A float32 model's fused runner with every linear on the kernel, and its norms on the
    AVX2 RMSNorm: the logits of transformers' own forward, for a prompt step and a decode
    step; its oneDNN copies freed."""
    from transformers import AutoModelForCausalLM

    from engine.embedded.attention import Segment, make_plan
    from engine.embedded.fused import FusedLlama
    from engine.embedded.kv_pool import KVPool
    from engine.embedded.linear import GemvLinear, packing_helps_drafts
    from engine.embedded.pointwise_f32 import NativePointwiseF32

    if not packing_helps_drafts(torch.float32):
        pytest.skip("this PyTorch build has no oneDNN prepacked linear (the GEMV's fallback)")
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    ids = list(range(500, 800))
    with torch.inference_mode():
        ref = model(torch.tensor([ids + [7]])).logits[0, -2:]
    norm = NativePointwiseF32(gemv_f32.library)
    runner = FusedLlama(model, pack=True, gemv_f32=gemv_f32, pointwise_f32=norm)
    assert runner.gemv is gemv_f32 and runner.gemv_switch.on and runner.pointwise_f32 is not None
    linears = [runner.lm_head] + [lin for layer in runner.layers for lin in (layer.qkv, layer.o)]
    assert all(isinstance(lin, GemvLinear) for lin in linears)
    weights = sum(p.numel() * 4 for n, p in model.named_parameters() if "proj" in n)
    assert runner.drop_onednn_copies() >= weights  # the layers' and the head's float32 copies
    cfg = model.config
    pool = KVPool(cfg.num_hidden_layers, 1, cfg.num_key_value_heads, 64, torch.float32)
    first = runner.step(ids, make_plan(pool, 0, [Segment(0, 0, len(ids))]), [len(ids) - 1])
    second = runner.step([7], make_plan(pool, 1, []), [0])
    got = torch.cat([first, second])
    assert torch.allclose(got, ref, atol=2e-4)
