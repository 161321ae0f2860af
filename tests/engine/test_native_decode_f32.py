"""Float32 decode attention on the AVX2 kernel (``kernels/attention_avx2.c``,
``attention_f32.py``), built for real: against float64 attention for several head layouts,
each query the same bit for bit whatever shares its call, the calls it refuses, and ``attend``
on it against PyTorch's attention for a packed step."""

from __future__ import annotations

import pytest
import torch
from support.avx2_kernels import needs_avx2

from engine.embedded.attention_f32 import NativeDecodeF32

pytestmark = needs_avx2


@pytest.fixture(scope="module")
def dec(gemv_f32) -> NativeDecodeF32:  # noqa: ANN001
    return NativeDecodeF32(gemv_f32.library)


def pool(rows: int, hkv: int, capacity: int, dim: int, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(rows, hkv, capacity, dim, generator=g) for _ in range(2))


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, length: int) -> torch.Tensor:
    """float64 attention of one query ``[Hq, D]`` over ``k``/``v`` ``[Hkv, >= length, D]``."""
    groups = q.shape[0] // k.shape[0]
    keys = k[:, :length].double().repeat_interleave(groups, 0)
    values = v[:, :length].double().repeat_interleave(groups, 0)
    scores = (keys @ q.double().unsqueeze(-1)).squeeze(-1) * q.shape[-1] ** -0.5
    return (torch.softmax(scores, -1).unsqueeze(1) @ values).squeeze(1)


@pytest.mark.parametrize(
    ("hq", "hkv", "dim"),
    [(9, 3, 64), (14, 2, 64), (32, 1, 64), (4, 4, 128), (8, 2, 8)],
    ids=["smollm2", "qwen2", "32-per-kv", "multi-head", "tiny-head"],
)
def test_queries_match_float64_attention(dec: NativeDecodeF32, hq: int, hkv: int, dim: int) -> None:
    keys, values = pool(3, hkv, 700, dim, seed=hq + dim)
    # row 0 alone; row 1 with three drafts after its new token; row 2 at full capacity and
    # a query that sees one key; lengths off the 8-key blocks
    slots = torch.tensor([0, 1, 1, 1, 1, 2, 2], dtype=torch.int32)
    lengths = torch.tensor([5, 300, 301, 302, 303, 700, 1], dtype=torch.int32)
    q = torch.randn(7, hq, dim, generator=torch.Generator().manual_seed(1))
    out = torch.full((7, hq, dim), 7.0)
    dec.decode(q, keys, values, lengths, 0, out, dim**-0.5, slots)
    for i in range(7):
        s, n = int(slots[i]), int(lengths[i])
        want = reference(q[i], keys[s], values[s], n)
        assert (out[i].double() - want).abs().max() < 2e-6, i


def test_a_query_is_computed_alike_whatever_shares_its_call(dec: NativeDecodeF32) -> None:
    keys, values = pool(4, 3, 512, 64, seed=3)
    q = torch.randn(6, 9, 64, generator=torch.Generator().manual_seed(4))
    slots = torch.tensor([0, 1, 2, 3, 3, 3], dtype=torch.int32)
    lengths = torch.tensor([1, 77, 512, 200, 201, 202], dtype=torch.int32)
    together = torch.empty(6, 9, 64)
    dec.decode(q, keys, values, lengths, 0, together, 0.125, slots)
    for i in range(6):
        alone, one = torch.empty(1, 9, 64), slice(i, i + 1)
        dec.decode(q[one], keys, values, lengths[one], 0, alone, 0.125, slots[one])
        assert torch.equal(alone[0], together[i]), i


def test_a_shared_prefix_is_read_from_row_0_with_the_same_result(dec: NativeDecodeF32) -> None:
    """Rows 0-3 hold the same 300-token prefix: with ``shared`` every query reads it from row
    0 (the others' copies are not read: they are overwritten here), and the outputs are the
    same bit for bit as each row reading its own copy."""
    keys, values = pool(4, 3, 512, 64, seed=11)
    for t in (keys, values):
        t[1:, :, :300] = t[0, :, :300]
    q = torch.randn(6, 9, 64, generator=torch.Generator().manual_seed(12))
    slots = torch.tensor([0, 1, 2, 3, 3, 3], dtype=torch.int32)
    lengths = torch.tensor([301, 350, 512, 400, 401, 402], dtype=torch.int32)
    own, shared = torch.empty(6, 9, 64), torch.empty(6, 9, 64)
    dec.decode(q, keys, values, lengths, 0, own, 0.125, slots)
    for t in (keys, values):
        t[1:, :, :300] = float("nan")
    dec.decode(q, keys, values, lengths, 300, shared, 0.125, slots)
    assert torch.equal(own, shared)
    with pytest.raises(ValueError, match="out of range"):  # a length within the prefix
        dec.decode(q, keys, values, lengths, 301, shared, 0.125, slots)


def test_calls_it_cannot_serve_are_refused_and_write_nothing(dec: NativeDecodeF32) -> None:
    keys, values = pool(2, 3, 64, 64, seed=5)
    q, out = torch.zeros(2, 9, 64), torch.full((2, 9, 64), 7.0)
    ok = torch.tensor([3, 4], dtype=torch.int32)
    bad = [
        (ok, torch.tensor([0, 2], dtype=torch.int32), ValueError),  # row 2 of 2
        (torch.tensor([0, 4], dtype=torch.int32), None, ValueError),  # a query seeing no key
        (torch.tensor([3, 65], dtype=torch.int32), None, ValueError),  # past the capacity
        (ok.long(), None, ValueError),  # int64 lengths
    ]
    for lengths, slots, error in bad:
        with pytest.raises(error, match="attention kernel"):
            dec.decode(q, keys, values, lengths, 0, out, 0.125, slots)
    with pytest.raises(ValueError, match="float32"):
        dec.decode(q.bfloat16(), keys, values, ok, 0, out, 0.125)
    with pytest.raises(RuntimeError, match="unsupported shape"):
        dec.decode(torch.zeros(2, 8, 64), keys, values, ok, 0, torch.zeros(2, 8, 64), 0.125)
    assert (out == 7).all()
    assert NativeDecodeF32.supports(torch.float32, 64)
    assert not NativeDecodeF32.supports(torch.bfloat16, 64)
    assert not NativeDecodeF32.supports(torch.float32, 60)


def test_attend_on_it_matches_pytorch_attention(dec: NativeDecodeF32) -> None:
    """A packed step (two decoding rows, one with two drafts, and a prompt segment after a
    cached prefix) through ``attend``: the same outputs and the same stored KV as PyTorch's
    decode path."""
    from engine.embedded.attention import Segment, attend, make_plan
    from engine.embedded.kv_pool import KVPool

    hq, hkv, dim = 9, 3, 64
    gen = torch.Generator().manual_seed(6)
    n = 2 + 2 + 40  # decode rows, drafts, the segment
    q = torch.randn(1, hq, n, dim, generator=gen)
    k = torch.randn(1, hkv, n, dim, generator=gen)
    v = torch.randn(1, hkv, n, dim, generator=gen)
    outs, pools = [], []
    for decoder in (None, dec):
        kv = KVPool(1, 3, hkv, dim, torch.float32)
        kv.ensure(256)
        g = torch.Generator().manual_seed(7)
        for row, length in ((0, 90), (1, 33), (2, 120)):
            kv.keys[0][row, :, :length] = torch.randn(hkv, length, dim, generator=g)
            kv.values[0][row, :, :length] = torch.randn(hkv, length, dim, generator=g)
            kv.lengths[row] = length
        plan = make_plan(kv, 2, [Segment(2, 120, 40)], drafts=[(1, 2)], decoder=decoder)
        assert (plan.decode_mask is None) == (decoder is not None)
        outs.append(attend(plan, 0, q, k, v, dim**-0.5))
        pools.append(kv)
    assert torch.allclose(outs[0], outs[1], atol=1e-5)
    assert torch.equal(pools[0].keys[0], pools[1].keys[0])
    assert torch.equal(pools[0].values[0], pools[1].values[0])
