"""The native attention kernels (``engine/embedded/native.py``): built for real with the system
compiler, checked against PyTorch's float32 attention, and wired into the fused runner. Decode
attention's own checks: ``test_native_decode_attention.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from support.native_attention import REASON, built_kernel, needs_kernel, reference_attention

from engine.embedded.calibrate import decode_on_amx
from engine.embedded.native import NativeKernels, build, load_native_kernels


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> NativeKernels:
    return built_kernel(tmp_path_factory)


@needs_kernel
@pytest.mark.parametrize(
    ("start", "count", "hq", "hkv", "dim"),
    [
        (0, 300, 9, 3, 64),  # a fresh prompt, grouped-query heads, rows not a tile multiple
        (517, 130, 9, 3, 64),  # a chunk after a cached prefix
        (0, 1, 2, 1, 64),  # one row
        (63, 70, 4, 4, 128),  # plain multi-head, the larger head size
        (1000, 17, 9, 3, 64),  # a follow-up question: one query block and a row past it
        (0, 1550, 9, 3, 64),  # a long RAG prompt
    ],
)
@pytest.mark.parametrize("amx", [False, True], ids=["avx512", "amx"])
def test_prefill_matches_float32_attention(
    kernel: NativeKernels, start: int, count: int, hq: int, hkv: int, dim: int, amx: bool
) -> None:
    if amx and not kernel.amx_prefill_supports(dim):
        pytest.skip(f"no AMX prefill here for head_dim {dim} (CPU without AMX tiles, or 128)")
    torch.manual_seed(start + count)
    # q as the fused runner lays it out: heads interleaved in each token's row (a view)
    qkv = torch.randn(count, hq + 2 * hkv, dim).to(torch.bfloat16)
    q = qkv[:, :hq].transpose(0, 1)
    capacity = start + count + 40  # the pool row is longer than the keys in use
    keys = torch.randn(hkv, capacity, dim).to(torch.bfloat16)
    values = torch.randn(hkv, capacity, dim).to(torch.bfloat16)
    out = torch.full((count, hq, dim), float("nan"), dtype=torch.bfloat16)
    kernel.prefill(q, keys, values, out, start, dim**-0.5, amx=amx)
    ref = reference_attention(q, keys, values, start)
    assert torch.isfinite(out).all()
    # bfloat16 output: within a few units in the last place of values of order 1
    assert (out.float() - ref).abs().max() < 0.03
    assert (out.float() - ref).abs().mean() < 2e-3


@needs_kernel
def test_pointwise_kernels_match_transformers_roundings(kernel: NativeKernels) -> None:
    """Residual add + LlamaRMSNorm, SiLU-gate and rotary, as PyTorch computes them in bfloat16
    (float32 inside, the same roundings); rows as views with a row stride."""
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    torch.manual_seed(3)
    for rows in (1, 7, 300):  # one decode row; a few; enough for the threaded path
        wide = torch.randn(rows, 1000).to(torch.bfloat16)
        h = wide[:, :576]  # a view: row stride 1000
        delta = torch.randn(rows, 576).to(torch.bfloat16)
        norm = LlamaRMSNorm(576, eps=1e-5).to(torch.bfloat16)
        norm.weight.data = torch.randn(576).to(torch.bfloat16)
        expect_h = h + delta
        with torch.inference_mode():
            expect = norm(expect_h)
        got = kernel.add_rms_norm(h, delta, norm.weight.data, 1e-5)
        assert torch.equal(h, expect_h)  # the residual was added in place, rounded alike
        assert (got.float() - expect.float()).abs().max() <= 0.02 * expect.abs().max()
        assert (got != expect).float().mean() < 0.01  # all but a rare last-bit difference
        gate_up = torch.randn(rows, 2 * 1536).to(torch.bfloat16) * 3
        gate, up = gate_up.chunk(2, dim=-1)
        expect = torch.nn.functional.silu(gate) * up
        got = kernel.silu_mul(gate_up)
        assert (got.float() - expect.float()).abs().max() <= 0.02 * expect.abs().max()
        assert (got != expect).float().mean() < 0.01
        # rotary, in place on q and k heads inside a wider row (the fused QKV output)
        from engine.embedded.fused import _rope

        qkv = torch.randn(rows, 15 * 64).to(torch.bfloat16)
        qk = qkv[:, : 12 * 64].view(rows, 12, 64)
        v = qkv[:, 12 * 64 :].clone()
        angles = torch.randn(rows, 1, 32).repeat(1, 1, 2)
        cos, sin = angles.cos().to(torch.bfloat16), angles.sin().to(torch.bfloat16)
        expect = _rope(qk, cos, sin)
        assert kernel.rope_(qk, cos[:, 0], sin[:, 0]) is qk
        assert (qk.float() - expect.float()).abs().max() <= 0.02 * expect.abs().max()
        # one rounding instead of PyTorch's two: last-bit differences, nothing more
        assert (qk.float() - expect.float()).abs().mean() <= 0.005 * expect.abs().float().mean()
        assert torch.equal(qkv[:, 12 * 64 :], v)  # the v heads after them are untouched
    with pytest.raises(ValueError, match="multiple of 16"):
        kernel.add_rms_norm(torch.zeros(2, 40).bfloat16(), None, torch.ones(40).bfloat16(), 1e-5)


@needs_kernel
def test_kernel_refuses_layouts_it_cannot_read(kernel: NativeKernels) -> None:
    q = torch.zeros(2, 8, 64, dtype=torch.float32)
    kv = torch.zeros(1, 8, 64, dtype=torch.bfloat16)
    out = torch.zeros(8, 2, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="bfloat16"):
        kernel.prefill(q, kv, kv, out, 0, 0.125)
    with pytest.raises(ValueError, match="shapes"):
        kernel.prefill(q.bfloat16(), kv, kv, out, 4, 0.125)  # keys end before the segment does
    kv4 = torch.zeros(2, 1, 8, 64, dtype=torch.bfloat16)
    q1 = torch.zeros(2, 2, 64, dtype=torch.bfloat16)
    lengths = torch.tensor([8, 8], dtype=torch.int32)
    with pytest.raises(ValueError, match="range"):
        kernel.decode(q1, kv4, kv4, lengths + 1, 0, q1.clone(), 0.125)  # past the pool
    with pytest.raises(ValueError, match="range"):
        kernel.decode(q1, kv4, kv4, lengths, 8, q1.clone(), 0.125)  # shared is the whole row
    with pytest.raises(ValueError, match="int32"):
        kernel.decode(q1, kv4, kv4, lengths.long(), 0, q1.clone(), 0.125)
    assert not kernel.supports(torch.float32, 64) and not kernel.supports(torch.bfloat16, 96)
    assert not kernel.amx_prefill_supports(128)  # the AMX prefill takes head_dim 64 only
    if kernel.amx:  # and refuses another in C too, writing nothing
        q128, kv128 = torch.zeros(2, 8, 128).bfloat16(), torch.zeros(1, 8, 128).bfloat16()
        out128 = torch.full((8, 2, 128), 7.0).bfloat16()
        with pytest.raises(RuntimeError, match="unsupported shape"):
            kernel.prefill(q128, kv128, kv128, out128, 0, 0.1, amx=True)
        assert (out128 == 7).all()


@needs_kernel
def test_build_is_cached_and_a_failed_build_falls_back(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    first = build(tmp_path)
    stamp = first.stat().st_mtime_ns
    assert build(tmp_path) == first and first.stat().st_mtime_ns == stamp
    # a compiler that fails: the engine keeps SDPA, and no half-written library is left
    monkeypatch.setenv("CC", "false")
    broken = tmp_path / "broken"
    assert load_native_kernels(broken) is None
    assert not any(p.suffix == ".so" for p in broken.glob("*"))


@needs_kernel
def test_fused_runner_on_the_kernels_matches_pytorch_attention(model_dir, kernel) -> None:  # noqa: ANN001
    """bfloat16 model: a long prompt in two chunks, a second prompt sharing its first 500
    tokens, then one decode step over both rows (the shared prefix read once): the kernels'
    logits agree with PyTorch's (SDPA and matmul attention, F.rms_norm, F.silu), also where
    the prefill segments are routed to SDPA beside the kernels, or to the AMX kernel."""
    from transformers import AutoModelForCausalLM

    from engine.embedded.attention import Segment, make_plan
    from engine.embedded.attention_routes import NATIVE_PREFILL, PrefillRoute
    from engine.embedded.fused import FusedLlama
    from engine.embedded.kv_pool import KVPool

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.bfloat16).eval()
    cfg = model.config
    a = list(range(1000, 1600))
    b = a[:500] + list(range(2000, 2090))
    results = []
    routes = [NATIVE_PREFILL, PrefillRoute("sdpa", "sdpa")]
    if kernel.amx_prefill_supports(64):
        routes.append(PrefillRoute("amx", "amx"))
    for k, route in [(None, NATIVE_PREFILL)] + [(kernel, route) for route in routes]:
        runner = FusedLlama(model, kernels=k)  # the pointwise kernels too
        assert runner.kernels is k
        pool = KVPool(cfg.num_hidden_layers, 2, cfg.num_key_value_heads, 64, torch.bfloat16)
        runner.step(a[:300], make_plan(pool, 0, [Segment(0, 0, 300)], k, route=route), [299])
        plan = make_plan(pool, 0, [Segment(0, 300, 300)], k, route=route)
        path = route.long if k is not None else "sdpa"
        assert plan.segments[0].path == path
        assert (plan.kernel is k) and (plan.segments[0].mask is None) == (path != "sdpa")
        first = runner.step(a[300:], plan, [299])
        plan = make_plan(pool, 0, [Segment(1, 0, len(b))], k, route=route)
        runner.step(b, plan, [len(b) - 1])
        plan = make_plan(pool, 2, [], k, shared=500)
        assert plan.decode_shared == 500 and (plan.decode_mask is None) == (k is not None)
        decoded = runner.step([5, 6], plan, [0, 1])
        assert pool.lengths == [601, len(b) + 1]
        results.append(torch.cat([first, decoded]).float())
    pytorch, *kernels = results
    for row in range(3):
        for other in kernels:
            assert F.cosine_similarity(pytorch[row], other[row], dim=0) > 0.999, row
            assert int(pytorch[row].argmax()) == int(other[row].argmax()), row


def test_engine_decodes_a_shared_prompt_prefix_once(engine) -> None:  # noqa: ANN001
    """Three concurrent requests with one long common prompt prefix: the scheduler hands the
    kernels that prefix (read once per step), and every request is answered."""
    from concurrent.futures import ThreadPoolExecutor

    from engine.base import Finished, GenerateRequest, SamplingParams

    scheduler = engine._scheduler
    prefix = engine.encode("Travel policy: economy class for flights under six hours. " * 30)
    prompts = [
        prefix + engine.encode(f" Question {i}: what applies to trip {i}?") for i in range(3)
    ]
    seen: list[int] = []
    forward = scheduler.forward

    def spy(tokens, plan, keep):  # noqa: ANN001, ANN202
        if plan.n_decode > 1:
            seen.append(plan.decode_shared)
        return forward(tokens, plan, keep)

    def run(ids: list[int]) -> Finished:
        request = GenerateRequest(
            input_ids=tuple(ids), sampling=SamplingParams(12, ignore_eos=True)
        )
        return [i for i in engine.generate(request) if isinstance(i, Finished)][0]

    scheduler.forward = spy
    try:
        with ThreadPoolExecutor(3) as pool:
            finals = list(pool.map(run, prompts))
    finally:
        scheduler.forward = forward
    assert all(f.stats.completion_tokens == 12 for f in finals)
    common = min(
        next((i for i, (x, y) in enumerate(zip(prompts[0], p, strict=False)) if x != y), len(p))
        for p in prompts[1:]
    )
    assert common >= len(prefix) - 1
    assert seen and max(seen) == common


@needs_kernel
def test_a_compiler_without_amx_builds_the_rest_and_the_amx_kernels_refuse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older compiler (no ``-mamx-tile``) still builds every other kernel; the AMX prefill
    and decode attention and the AMX linear are stubs that say why they refuse, and the
    engine's timing leaves them out."""
    from engine.embedded import native

    assert native.compiler_accepts("cc", ("-O2",))
    assert not native.compiler_accepts("cc", ("-mno-such-flag",))
    monkeypatch.setattr(native, "compiler_accepts", lambda compiler, flags: False)
    stubbed = NativeKernels(build(tmp_path))
    assert not stubbed.amx and not stubbed.amx_prefill_supports(64)
    q, kv = torch.zeros(2, 8, 64).bfloat16(), torch.zeros(1, 8, 64).bfloat16()
    out = torch.full((8, 2, 64), 7.0).bfloat16()
    with pytest.raises(RuntimeError, match="without AMX"):
        stubbed.prefill(q, kv, kv, out, 0, 0.125, amx=True)
    assert (out == 7).all()
    stubbed.prefill(q, kv, kv, out, 0, 0.125)  # the AVX-512 kernel is there
    assert torch.isfinite(out).all() and not (out == 7).any()
    pool = torch.zeros(1, 1, 8, 64).bfloat16()
    one, dec = torch.tensor([8], dtype=torch.int32), torch.full((1, 2, 64), 7.0).bfloat16()
    with pytest.raises(RuntimeError, match="without AMX"):
        stubbed.decode(torch.zeros(1, 2, 64).bfloat16(), pool, pool, one, 0, dec, 0.125, amx=True)
    assert (dec == 7).all()
    assert not decode_on_amx(stubbed, 2, 1, 64)
    with pytest.raises(RuntimeError, match="without AMX"):
        stubbed.amx_linear(torch.zeros(1, 32).bfloat16(), torch.zeros(32 * 32).bfloat16(), 32)


@pytest.mark.parametrize("path", ["native", "amx", "sdpa", "matmul", "none"])
def test_attending_only_the_needed_queries_stores_every_key_and_changes_no_output(
    request: pytest.FixtureRequest, path: str
) -> None:
    """The last layer's pruning (``attend(..., need)``): two decode rows and two prompt
    segments, of which one has no needed query and one needs two rows mid-way and its last:
    every token's K/V lands in the pool as in a full call, and each needed output is the full
    call's (bit for bit on the AVX-512 kernel, whose query rows never meet)."""
    from engine.embedded.attention import Segment, attend, make_plan
    from engine.embedded.attention_routes import PrefillRoute
    from engine.embedded.kv_pool import KVPool

    # "sdpa" runs the prompt segments on PyTorch but the decode rows on the kernel
    if path in ("native", "amx", "sdpa") and REASON is not None:
        pytest.skip(f"native kernel cannot run: {REASON}")
    # the kernel is built only where this path uses it: the fixture fails where it cannot run
    k = None if path in ("none", "matmul") else request.getfixturevalue("kernel")
    if path == "amx" and not k.amx_prefill_supports(64):
        pytest.skip("this CPU or compiler has no AMX prefill kernel")
    route = PrefillRoute(path, path) if k is not None else PrefillRoute()
    gen = torch.Generator().manual_seed(3)
    layers, hq, hkv, dim = 1, 9, 3, 64

    def pool_with_prefixes() -> KVPool:
        pool = KVPool(layers, 4, hkv, dim, torch.bfloat16)
        pool.ensure(1024)
        g = torch.Generator().manual_seed(5)
        for row, length in ((0, 200), (1, 150), (2, 260)):
            pool.keys[0][row, :, :length] = torch.randn(hkv, length, dim, generator=g)
            pool.values[0][row, :, :length] = torch.randn(hkv, length, dim, generator=g)
            pool.lengths[row] = length
        return pool

    # segments: slot 2 continues after 260 cached tokens; slot 3 is a fresh 300-token prompt
    counts = (2, 140, 300)
    n = sum(counts)
    q = torch.randn(1, hq, n, dim, generator=gen).bfloat16()
    kk = torch.randn(1, hkv, n, dim, generator=gen).bfloat16()
    vv = torch.randn(1, hkv, n, dim, generator=gen).bfloat16()
    need = [0, 1, 2 + 140 + 100, 2 + 140 + 101, n - 1]  # none of slot 2's queries
    outs, pools = [], []
    for wanted in (None, need):
        pool = pool_with_prefixes()
        segments = [Segment(2, 260, 140), Segment(3, 0, 300)]
        plan = make_plan(pool, 2, segments, k, route=route)
        if path == "matmul":
            for seg in plan.segments:
                seg.path = "matmul"
        outs.append(attend(plan, 0, q, kk, vv, dim**-0.5, wanted))
        pools.append(pool)
    full, pruned = outs
    assert pruned.shape == (1, len(need), hq, dim)
    for store in ("keys", "values"):
        assert torch.equal(getattr(pools[0], store)[0], getattr(pools[1], store)[0])
    exact = path == "native"
    for i, token in enumerate(need):
        a, b = full[0, token].float(), pruned[0, i].float()
        assert torch.equal(a, b) if exact else torch.allclose(a, b, atol=2e-2), token
