"""The native decode step (``decode_step.py``, ``kernels/decode_step.c``): every layer of a
decode-only step in one call gives the fused runner's Python loop's results bit for bit."""

from __future__ import annotations

import pytest
import torch
from support.tiny_models import tiny_qwen2

from engine.embedded.attention import Segment, make_plan
from engine.embedded.fused import FusedLlama
from engine.embedded.kv_pool import KVPool
from engine.embedded.linear import packing_available
from engine.embedded.native import AmxDecode, load_native_kernels, unsupported_reason

REASON = unsupported_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"native kernels cannot run: {REASON}")


@pytest.fixture(scope="module", params=["smollm2", "qwen2-with-biases"])
def runner(request, model_dir, tmp_path_factory: pytest.TempPathFactory) -> FusedLlama:  # noqa: ANN001
    from transformers import AutoModelForCausalLM

    if not packing_available(torch.bfloat16):
        pytest.skip("no prepacked linears here")
    kernels = load_native_kernels(tmp_path_factory.mktemp("kernels"))
    assert kernels is not None
    if request.param == "smollm2":
        model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.bfloat16).eval()
    else:
        model = tiny_qwen2(7)
    fused = FusedLlama(model, pack=True, kernels=kernels)
    assert fused.native_step is not None and fused.gemv_switch.on
    return fused


def _pool(runner: FusedLlama) -> KVPool:
    """Two rows holding prompts that share their first 40 tokens."""
    pool = KVPool(len(runner.layers), 3, runner.kv_heads, runner.head_dim, torch.bfloat16)
    kernel = runner.kernels
    a = list(range(1000, 1130))
    b = a[:40] + list(range(3000, 3075))
    for slot, ids in ((0, a), (1, b)):
        runner.step(ids, make_plan(pool, 0, [Segment(slot, 0, len(ids))], kernel), [len(ids) - 1])
    return pool


def _decode(runner: FusedLlama, pool: KVPool, native: bool) -> list[torch.Tensor]:
    """Two decode steps: row 0 with two drafts, then both rows plain; the logits of each."""
    saved = runner.native_step
    if not native:
        runner.native_step = None
    try:
        kernel = runner.kernels
        plan = make_plan(pool, 2, [], kernel, shared=40, drafts=[(0, 2)])
        assert plan.decode_shared == 40 and plan.decode_slots is not None
        first = runner.step([11, 12, 13, 14], plan, [0, 1, 2, 3])
        plan = make_plan(pool, 2, [], kernel, shared=40)
        return [first, runner.step([15, 16], plan, [0, 1])]
    finally:
        runner.native_step = saved


def test_native_step_gives_the_python_loops_logits_and_kv_bit_for_bit(runner: FusedLlama) -> None:
    pools = [_pool(runner), _pool(runner)]
    native = _decode(runner, pools[0], native=True)
    python = _decode(runner, pools[1], native=False)
    for got, want in zip(native, python, strict=True):
        assert torch.equal(got, want)
    assert pools[0].lengths == pools[1].lengths == [130 + 3 + 1, 115 + 1 + 1, 0]
    for layer in range(len(runner.layers)):
        assert torch.equal(pools[0].keys[layer], pools[1].keys[layer])
        assert torch.equal(pools[0].values[layer], pools[1].values[layer])


def test_native_step_refuses_a_length_past_the_pool(runner: FusedLlama) -> None:
    pool = _pool(runner)
    plan = make_plan(pool, 2, [], runner.kernels)
    plan.decode_lengths = torch.tensor([pool.capacity + 1, 5], dtype=torch.int32)
    h = torch.zeros(2, runner.hidden, dtype=torch.bfloat16)
    cos = torch.zeros(2, runner.head_dim, dtype=torch.bfloat16)
    assert runner.native_step is not None
    with pytest.raises(ValueError, match="out of range"):
        runner.native_step(h, cos, cos, plan)
    assert pool.lengths == [130, 115, 0]  # nothing advanced


def _shared_pool(runner: FusedLlama) -> KVPool:
    """Two rows holding prompts that share their first 100 tokens (past one key block of the
    AMX decode attention's, so its shared-prefix pass runs)."""
    pool = KVPool(len(runner.layers), 3, runner.kv_heads, runner.head_dim, torch.bfloat16)
    a = list(range(1000, 1130))
    b = a[:100] + list(range(3000, 3015))
    for slot, ids in ((0, a), (1, b)):
        plan = make_plan(pool, 0, [Segment(slot, 0, len(ids))], runner.kernels)
        runner.step(ids, plan, [len(ids) - 1])
    return pool


def test_on_amx_tiles_a_row_decodes_alike_alone_and_batched(runner: FusedLlama) -> None:
    """The native step on the AMX tiles (its linears on the GEMV's panels, attention on
    ``decode_attention_amx``): a request and its drafts get the same logits bit for bit
    whether another request decodes beside them or not, and about the Python loop's."""
    if not runner.amx_step_available():
        pytest.skip("no AMX tiles here (or shapes they do not take)")
    amx = AmxDecode(runner.kernels)
    assert runner.native_step is not None
    runner.native_step.amx = True
    try:
        pools = [_shared_pool(runner), _shared_pool(runner)]
        plan = make_plan(pools[0], 2, [], runner.kernels, shared=100, drafts=[(0, 2)], decoder=amx)
        assert runner._decodes_natively(plan, [0, 1, 2, 3])
        both = runner.step([11, 12, 13, 14], plan, [0, 1, 2, 3])
        plan = make_plan(pools[1], 1, [], runner.kernels, drafts=[(0, 2)], decoder=amx)
        alone = runner.step([11, 13, 14], plan, [0, 1, 2])
        assert torch.equal(both[[0, 2, 3]], alone)
        for layer in range(len(runner.layers)):  # row 0's new keys and values alike
            assert torch.equal(pools[0].keys[layer][0], pools[1].keys[layer][0])
        # the AVX-512 GEMV and attention in the Python loop: the same up to rounding
        runner.native_step.amx = False
        plan = make_plan(_shared_pool(runner), 2, [], runner.kernels, shared=100)
        python = _decode_python(runner, plan)
        pool = _shared_pool(runner)
        runner.native_step.amx = True
        plan = make_plan(pool, 2, [], runner.kernels, shared=100, decoder=amx)
        tiles = runner.step([15, 16], plan, [0, 1])
        assert (tiles.float() - python.float()).abs().max() < 0.1 * python.float().abs().max()
    finally:
        runner.native_step.amx = False


def _decode_python(runner: FusedLlama, plan) -> torch.Tensor:  # noqa: ANN001
    saved, runner.native_step = runner.native_step, None
    try:
        return runner.step([15, 16], plan, [0, 1])
    finally:
        runner.native_step = saved


def test_on_amx_tiles_a_decode_row_beside_a_prompt_chunk_decodes_alike(runner: FusedLlama) -> None:
    """With decode rows on the tiles, a decode row that rides in a step carrying a prompt
    chunk (the Python loop, the chunk's linears on oneDNN) gets the logits it gets in a
    decode-only step (the native step), bit for bit."""
    if not runner.amx_step_available():
        pytest.skip("no AMX tiles here (or shapes they do not take)")
    amx = AmxDecode(runner.kernels)
    assert runner.native_step is not None
    runner.decode_on_tiles()
    try:
        pools = [_shared_pool(runner), _shared_pool(runner)]
        plan = make_plan(pools[0], 1, [], runner.kernels, decoder=amx)
        assert runner._decodes_natively(plan, [0])
        alone = runner.step([11], plan, [0])
        plan = make_plan(pools[1], 1, [Segment(2, 0, 40)], runner.kernels, decoder=amx)
        assert not runner._decodes_natively(plan, [0, 40])
        mixed = runner.step([11, *range(500, 540)], plan, [0, 40])
        assert torch.equal(mixed[0], alone[0])
    finally:
        runner.native_step.amx = False
        runner.decode_rows_on_tiles = False
