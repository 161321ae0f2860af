"""The float32 native decode step (``decode_step.py`` with ``kernels/decode_step_avx2.c``):
every layer of a decode-only step in one call gives the fused runner's Python loop's results
bit for bit, drafts and a shared prompt prefix included, on SmolLM2 and on a model whose QKV
projections have biases."""

from __future__ import annotations

import pytest
import torch
from support.avx2_kernels import needs_avx2
from support.tiny_models import tiny_qwen2

from engine.embedded.attention import Segment, make_plan
from engine.embedded.attention_f32 import NativeDecodeF32, NativePrefillF32
from engine.embedded.fused import FusedLlama
from engine.embedded.kv_pool import KVPool
from engine.embedded.pointwise_f32 import NativePointwiseF32

pytestmark = needs_avx2


@pytest.fixture(scope="module", params=["smollm2", "qwen2-with-biases"])
def parts(request, model_dir, gemv_f32):  # noqa: ANN001, ANN201
    """(runner, decode kernel, prefill kernel) for a float32 model on the AVX2 library."""
    from transformers import AutoModelForCausalLM

    if request.param == "smollm2":
        model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    else:
        model = tiny_qwen2(8).float()
    pointwise = NativePointwiseF32(gemv_f32.library)
    runner = FusedLlama(model, pack=True, gemv_f32=gemv_f32, pointwise_f32=pointwise)
    assert runner.native_step is not None and runner.native_step.dtype == torch.float32
    assert runner.gemv_switch.on
    return runner, NativeDecodeF32(gemv_f32.library), NativePrefillF32(gemv_f32.library)


def _pool(parts) -> KVPool:  # noqa: ANN001
    """Two rows holding prompts that share their first 40 tokens."""
    runner, _, prefiller = parts
    pool = KVPool(len(runner.layers), 3, runner.kv_heads, runner.head_dim, torch.float32)
    a = list(range(1000, 1130))
    b = a[:40] + list(range(3000, 3075))
    for slot, ids in ((0, a), (1, b)):
        plan = make_plan(pool, 0, [Segment(slot, 0, len(ids))], prefiller=prefiller)
        runner.step(ids, plan, [len(ids) - 1])
    return pool


def _decode(parts, pool: KVPool, native: bool) -> list[torch.Tensor]:  # noqa: ANN001
    """Two decode steps: row 0 with two drafts, then both rows plain; the logits of each."""
    runner, decoder, _ = parts
    saved = runner.native_step
    calls = []
    if native:
        real = saved.__call__

        def counted(*args):  # noqa: ANN002, ANN202
            calls.append(1)
            return real(*args)

        runner.native_step = counted
        runner.native_step.dtype = saved.dtype
    else:
        runner.native_step = None
    try:
        plan = make_plan(pool, 2, [], shared=40, drafts=[(0, 2)], decoder=decoder)
        assert plan.decode_shared == 40 and plan.decode_slots is not None
        first = runner.step([11, 12, 13, 14], plan, [0, 1, 2, 3])
        plan = make_plan(pool, 2, [], shared=40, decoder=decoder)
        out = [first, runner.step([15, 16], plan, [0, 1])]
    finally:
        runner.native_step = saved
    assert len(calls) == (2 if native else 0)  # both steps ran in the one native call
    return out


def test_native_step_gives_the_python_loops_logits_and_kv_bit_for_bit(parts) -> None:  # noqa: ANN001
    runner = parts[0]
    pools = [_pool(parts), _pool(parts)]
    native = _decode(parts, pools[0], native=True)
    python = _decode(parts, pools[1], native=False)
    for got, want in zip(native, python, strict=True):
        assert torch.equal(got, want)
    assert pools[0].lengths == pools[1].lengths == [130 + 3 + 1, 115 + 1 + 1, 0]
    for layer in range(len(runner.layers)):
        assert torch.equal(pools[0].keys[layer], pools[1].keys[layer])
        assert torch.equal(pools[0].values[layer], pools[1].values[layer])


def test_native_step_refuses_what_it_cannot_serve(parts) -> None:  # noqa: ANN001
    runner, decoder, _ = parts
    pool = _pool(parts)
    plan = make_plan(pool, 2, [], decoder=decoder)
    plan.decode_lengths = torch.tensor([pool.capacity + 1, 5], dtype=torch.int32)
    h = torch.zeros(2, runner.hidden)
    cos = torch.zeros(2, runner.head_dim)
    assert runner.native_step is not None
    with pytest.raises(ValueError, match="out of range"):
        runner.native_step(h, cos, cos, plan)
    with pytest.raises(ValueError, match="float32"):
        runner.native_step(h.bfloat16(), cos, cos, plan)
    assert pool.lengths == [130, 115, 0]  # nothing advanced
