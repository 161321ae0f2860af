"""Float32 prefill attention on the AVX2 kernel (``kernels/prefill_avx2.c``,
``attention_f32.NativePrefillF32``), built for real: against float64 attention for several head
layouts and segment positions, each query the same bit for bit however its prompt is cut into
segments, the calls it refuses, and ``attend`` on it against PyTorch's attention."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from support.avx2_kernels import needs_avx2

from engine.embedded.attention_f32 import NativePrefillF32

pytestmark = needs_avx2


@pytest.fixture(scope="module")
def pre(gemv_f32) -> NativePrefillF32:  # noqa: ANN001
    return NativePrefillF32(gemv_f32.library)


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int) -> torch.Tensor:
    """float64 causal attention of ``q`` ``[Hq, n, D]`` (positions ``start ..``) over ``k``/``v``
    ``[Hkv, >= start + n, D]``: ``[n, Hq, D]``."""
    end = start + q.shape[1]
    hidden = torch.arange(end).unsqueeze(0) > torch.arange(start, end).unsqueeze(1)
    mask = torch.zeros(hidden.shape, dtype=torch.float64).masked_fill_(hidden, float("-inf"))
    keys, values = k[None, :, :end].double(), v[None, :, :end].double()
    out = F.scaled_dot_product_attention(
        q[None].double(), keys, values, attn_mask=mask, scale=q.shape[-1] ** -0.5, enable_gqa=True
    )
    return out[0].transpose(0, 1)


@pytest.mark.parametrize(
    ("hq", "hkv", "dim", "start", "n"),
    [
        (9, 3, 64, 0, 1),
        (9, 3, 64, 0, 300),
        (9, 3, 64, 1000, 77),
        (9, 3, 64, 64, 64),
        (14, 2, 64, 5, 130),
        (32, 1, 64, 0, 40),
        (4, 4, 128, 17, 200),
        (8, 2, 16, 3, 9),
    ],
    ids=["one", "smollm2", "after-prefix", "on-blocks", "qwen2", "32-per-kv", "multi-head", "tiny"],
)
def test_segments_match_float64_attention(
    pre: NativePrefillF32, hq: int, hkv: int, dim: int, start: int, n: int
) -> None:
    gen = torch.Generator().manual_seed(hq * 1000 + start + n)
    # the pool holds keys past the segment's end, which no query may see
    k = torch.randn(hkv, start + n + 20, dim, generator=gen) * 2
    v = torch.randn(hkv, start + n + 20, dim, generator=gen)
    q = torch.randn(hq, n, dim, generator=gen)
    out = torch.full((n, hq, dim), float("nan"))
    pre.prefill(q, k, v, out, start, dim**-0.5)
    assert (out.double() - reference(q, k, v, start)).abs().max() < 1e-5


def test_a_query_is_the_same_however_its_prompt_is_cut(pre: NativePrefillF32) -> None:
    """Whole, in pieces of odd sizes (as prompt chunks beside other requests and a cached
    prefix's continuation cut it), and through strided views: bit for bit."""
    gen = torch.Generator().manual_seed(8)
    q = torch.randn(700, 9, 64, generator=gen).transpose(0, 1)  # [Hq, n, D], a strided view
    k = torch.randn(3, 700, 64, generator=gen)
    v = torch.randn(3, 700, 64, generator=gen)
    whole = torch.empty(700, 9, 64)
    pre.prefill(q, k, v, whole, 0, 0.125)
    pieces = torch.empty(700, 9, 64)
    for a, b in ((0, 13), (13, 300), (300, 301), (301, 640), (640, 700)):
        pre.prefill(q[:, a:b], k, v, pieces[a:b], a, 0.125)
    assert torch.equal(whole, pieces)


def test_calls_it_cannot_serve_are_refused_and_write_nothing(pre: NativePrefillF32) -> None:
    k = v = torch.zeros(3, 64, 64)
    q, out = torch.zeros(9, 32, 64), torch.full((32, 9, 64), 7.0)
    with pytest.raises(ValueError, match="shapes"):
        pre.prefill(q, k, v, out, 40, 0.125)  # keys end before the segment does
    with pytest.raises(ValueError, match="float32"):
        pre.prefill(q.bfloat16(), k, v, out, 0, 0.125)
    with pytest.raises(ValueError, match="row-major"):
        pre.prefill(q, torch.zeros(3, 64, 128)[:, :, :64], v, out, 0, 0.125)  # padded rows
    with pytest.raises(ValueError, match="AMX"):
        pre.prefill(q, k, v, out, 0, 0.125, amx=True)
    with pytest.raises(RuntimeError, match="unsupported shape"):
        pre.prefill(torch.zeros(8, 32, 64), k, v, torch.zeros(32, 8, 64), 0, 0.125)  # 8 % 3
    assert (out == 7).all()
    assert NativePrefillF32.supports(torch.float32, 64)
    assert not NativePrefillF32.supports(torch.bfloat16, 64)
    assert not NativePrefillF32.supports(torch.float32, 8)


def test_attend_on_it_matches_pytorch_attention(pre: NativePrefillF32) -> None:
    """A packed step through ``attend``: a cold prompt segment, one after a cached prefix and a
    short one (PyTorch's SDPA and matmul paths without the kernel): the same outputs within
    rounding and the same stored KV."""
    from engine.embedded.attention import Segment, attend, make_plan
    from engine.embedded.kv_pool import KVPool

    hq, hkv, dim = 9, 3, 64
    gen = torch.Generator().manual_seed(9)
    sizes = (300, 200, 20)
    n = sum(sizes)
    q = torch.randn(1, hq, n, dim, generator=gen)
    k = torch.randn(1, hkv, n, dim, generator=gen)
    v = torch.randn(1, hkv, n, dim, generator=gen)
    outs, pools = [], []
    for prefiller in (None, pre):
        kv = KVPool(1, 3, hkv, dim, torch.float32)
        kv.ensure(1024)
        g = torch.Generator().manual_seed(10)
        for row, length in ((1, 500), (2, 90)):
            kv.keys[0][row, :, :length] = torch.randn(hkv, length, dim, generator=g)
            kv.values[0][row, :, :length] = torch.randn(hkv, length, dim, generator=g)
            kv.lengths[row] = length
        segments = [Segment(0, 0, 300), Segment(1, 500, 200), Segment(2, 90, 20)]
        plan = make_plan(kv, 0, segments, prefiller=prefiller)
        paths = [seg.path for seg in plan.segments]
        assert paths == (["sdpa", "sdpa", "matmul"] if prefiller is None else ["native"] * 3)
        outs.append(attend(plan, 0, q, k, v, dim**-0.5))
        pools.append(kv)
    assert torch.allclose(outs[0], outs[1], atol=1e-5)
    assert torch.equal(pools[0].keys[0], pools[1].keys[0])
    assert torch.equal(pools[0].values[0], pools[1].values[0])
