"""The embedded engine's fast paths: the slot KV pool, and the portable path on a CPU without
AVX-512 (forced with ``ATEN_CPU_CAPABILITY=avx2`` in a subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from support.paths import REPO

from appliance.core.config import SAMPLE_CORPUS
from engine.embedded.kv_pool import GROW, KVPool, reserved_positions


def _kv(length: int, fill: float) -> list:
    t = torch.full((1, 2, length, 4), fill)
    return [(t, t + 100), (t + 1, t + 101)]


def test_kv_pool_rows_load_move_swap_and_grow() -> None:
    pool = KVPool(layers=2, slots=3, kv_heads=2, head_dim=4, dtype=torch.float32)
    pool.load_pieces(0, [_kv(3, 1.0)])
    pool.load_pieces(2, [_kv(5, 2.0)])
    assert pool.lengths == [3, 0, 5] and pool.capacity == GROW
    assert torch.equal(pool.row(2)[1][1], _kv(5, 2.0)[1][1])
    pool.swap(0, 2)
    assert pool.lengths == [5, 0, 3]
    assert torch.equal(pool.row(0)[0][0], _kv(5, 2.0)[0][0])
    assert torch.equal(pool.row(2)[0][1], _kv(3, 1.0)[0][1])
    pool.move(2, 1)
    assert pool.lengths[1] == 3 and torch.equal(pool.row(1)[1][0], _kv(3, 1.0)[1][0])
    pool.ensure(GROW + 1)  # growing keeps every row
    assert pool.capacity == 2 * GROW
    assert torch.equal(pool.row(0)[1][1], _kv(5, 2.0)[1][1])
    assert torch.equal(pool.row(1)[0][0], _kv(3, 1.0)[0][0])
    # positions past a row's length are zeros (finite), so masked attention stays exact
    assert torch.count_nonzero(pool.keys[0][1, :, 3:]) == 0


def test_rows_are_reserved_for_an_even_share_of_the_budget_at_most_the_context() -> None:
    assert reserved_positions(8192, 32768, 8) == 4096
    assert reserved_positions(2048, 32768, 8) == 2048  # the context bounds a row
    assert reserved_positions(8192, 256, 64) == 4
    assert reserved_positions(8192, 10, 64) == 1


def test_the_native_engine_reserves_its_rows_at_start(model_dir) -> None:  # noqa: ANN001
    # the first long prompt then grows nothing (growing stalls every running request); a
    # fresh engine: the session's shared one has grown its rows for earlier tests' prompts
    from engine.embedded.engine import EmbeddedEngine

    eng = EmbeddedEngine(model_dir, kv_budget_tokens=1024, max_running=2, max_queue=1)
    try:
        if eng.attention == "pytorch":
            pytest.skip("no native kernels here: PyTorch's attention keeps rows short")
        want = reserved_positions(eng.context_length, 1024, 2)
        assert want == 512
        assert want <= eng._scheduler.pool.capacity < want + GROW
    finally:
        eng.close()


_PORTABLE = """
import json, sys, torch
from engine.base import Finished, GenerateRequest, SamplingParams, TextDelta
from engine.embedded.engine import EmbeddedEngine
eng = EmbeddedEngine(sys.argv[1], dtype="auto", max_running=2)
def run(prompt):
    text, final = "", None
    for item in eng.generate(GenerateRequest(prompt=prompt, sampling=SamplingParams(8))):
        if isinstance(item, TextDelta):
            text += item.text
        else:
            final = item
    return text, final.stats
shared = "Policy handbook: VPN access needs a hardware token and a PIN. " * 4
a, sa = run(shared + "Question one?")
b, sb = run(shared + "Question one?")
c, sc = run(shared + "Another question?")
eng.close()
print(json.dumps({
    "capability": torch.backends.cpu.get_cpu_capability(),
    "dtype": eng.info().dtype,
    "attention": eng.attention,
    "runtime": eng.info().runtime,
    "same": a == b,
    "cached": [sa.cached_tokens, sb.cached_tokens, sc.cached_tokens],
    "prompt": [sa.prompt_tokens, sb.prompt_tokens, sc.prompt_tokens],
    "shared": len(eng.encode(shared)),
    "completion": sa.completion_tokens,
}))
"""


def test_portable_path_without_avx512(model_dir) -> None:  # noqa: ANN001
    from engine.embedded.gemv_f32 import unsupported_reason as avx2_reason

    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", _PORTABLE, str(model_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["capability"] == "AVX2"
    assert out["dtype"] == "float32"  # "auto" picks float32 without AVX-512
    # the AVX-512 kernels need PyTorch at AVX-512; the float32 ones only the CPU's AVX2
    avx2 = avx2_reason() is None
    assert out["attention"] == ("avx2" if avx2 else "pytorch")
    # float32 is packed only for speculation's drafts, or for the AVX2 GEMV (in bfloat16)
    if "speculation" not in out["runtime"] and not avx2:
        assert "prepacked" not in out["runtime"]
    assert ("native GEMV (AVX2" in out["runtime"]) <= avx2
    assert out["completion"] > 0
    # the second run reuses every prompt token but the last, and answers the same
    assert out["same"] is True
    assert out["cached"][0] == 0 and out["cached"][1] == out["prompt"][1] - 1
    # the third shares the prefix: at least its tokens are reused, token-exact
    assert out["shared"] - 1 <= out["cached"][2] < out["prompt"][2]


def test_peer_workload_over_http_reports_exact_reuse(base: str, model_dir) -> None:  # noqa: ANN001
    """The side-by-side benchmark's client, against the real engine server: every token the
    warm prompt shares with the cold one is reused (page size 1, not whole blocks)."""
    from appliance.bench.peer_bench import build_workload
    from appliance.bench.peer_workload import run_workload

    work = build_workload(model_dir, quick=True)
    shared = next(i for i, (a, b) in enumerate(zip(work.cold[0], work.warm, strict=True)) if a != b)
    result = run_workload(base, work)
    # each cold prompt has a head of its own: none reuses another's prefix
    assert len(result.cold) == len(work.cold) >= 3
    for served, ids in zip(result.cold, work.cold, strict=True):
        assert served.cached_tokens == 0 and served.prompt_tokens == len(ids)
    assert result.warm.cached_tokens == shared
    assert result.distinct.generated == len(work.distinct) * work.new_tokens
    assert result.distinct.cached == 0
    # the shared-prefix phase: after the first request, the others reuse the whole prefix
    per_request = sorted(s.cached_tokens for s in result.shared.served)
    assert per_request[-1] >= shared


def test_fused_runner_matches_stock_transformers(model_dir) -> None:  # noqa: ANN001
    """The fused forward, over the KV pool in chunks and packed with a decode row, gives the
    logits of transformers' own full-sequence forward (float32): every attention path (decode
    rows, short segments, causal and masked SDPA) is on the way."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from engine.embedded.attention import Segment, make_plan
    from engine.embedded.fused import FusedLlama, fusable

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    corpus = sorted(SAMPLE_CORPUS.glob("*.md"))[0].read_text()
    # long enough that both of its segments take the SDPA paths (causal, then masked)
    a = tok(corpus)["input_ids"][:420]
    assert len(a) == 420
    b = tok("Expense reports are due on the fifth working day of each month")["input_ids"]
    with torch.inference_mode():
        ref_a = model(torch.tensor([a])).logits[0, -1]
        ref_b = model(torch.tensor([b + [a[0]]])).logits[0, -1]
    assert fusable(model)
    cfg = model.config
    pool = KVPool(cfg.num_hidden_layers, 2, cfg.num_key_value_heads, cfg.head_dim, torch.float32)
    runner = FusedLlama(model)
    cut = 160  # both parts longer than attention_routes.SHORT_SEGMENT
    runner.step(a[:cut], make_plan(pool, 0, [Segment(1, 0, cut)]), [cut - 1])
    runner.step(b, make_plan(pool, 0, [Segment(0, 0, len(b))]), [len(b) - 1])
    # row 0 decodes one token while row 1 finishes its prompt: one packed step
    tokens = [a[0]] + a[cut:]
    plan = make_plan(pool, 1, [Segment(1, cut, len(a) - cut)])
    logits = runner.step(tokens, plan, [0, len(tokens) - 1])
    assert pool.lengths == [len(b) + 1, len(a)]
    assert torch.allclose(logits[0], ref_b, atol=2e-4)
    assert torch.allclose(logits[1], ref_a, atol=2e-4)
    with torch.inference_mode():  # the stock forward on the re-bound (fused) weights
        assert torch.allclose(model(torch.tensor([a])).logits[0, -1], ref_a, atol=1e-5)


def test_prepacked_linears_match_plain_ones(model_dir) -> None:  # noqa: ANN001
    """bfloat16: the fused runner on oneDNN-prepacked weights gives the plain runner's logits,
    for a decode-sized and a prefill-sized step."""
    from transformers import AutoModelForCausalLM

    from engine.embedded.attention import Segment, make_plan
    from engine.embedded.fused import FusedLlama
    from engine.embedded.linear import make_linear, packing_available

    if not packing_available(torch.bfloat16):
        pytest.skip("this PyTorch build has no oneDNN prepacked linear")
    assert not packing_available(torch.float32)  # packing is for bfloat16 only
    w, b = torch.randn(96, 64).bfloat16(), torch.randn(96).bfloat16()
    x = torch.randn(5, 64).bfloat16()
    assert torch.allclose(
        make_linear(w, b, True)(x).float(), make_linear(w, b, False)(x).float(), atol=0.05
    )
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.bfloat16).eval()
    cfg = model.config
    logits = []
    for pack in (False, True):
        runner = FusedLlama(model, pack=pack)
        pool = KVPool(cfg.num_hidden_layers, 2, cfg.num_key_value_heads, 64, torch.bfloat16)
        ids = list(range(500, 800))
        first = runner.step(ids, make_plan(pool, 0, [Segment(0, 0, len(ids))]), [len(ids) - 1])
        second = runner.step([7], make_plan(pool, 1, []), [0])
        logits.append(torch.cat([first, second]).float())
    for row in range(2):
        assert torch.nn.functional.cosine_similarity(logits[0][row], logits[1][row], dim=0) > 0.999
        assert int(logits[0][row].argmax()) == int(logits[1][row].argmax())


def test_auto_dtype_is_bfloat16_only_where_the_cpu_computes_it_natively() -> None:
    from engine.embedded.engine import pick_dtype

    zen4 = frozenset({"avx512f", "avx512bw", "avx512_bf16"})
    skylake = frozenset({"avx512f", "avx512bw", "avx512vl"})  # AVX-512, no bf16 dot products
    assert pick_dtype("auto", zen4, "AVX512") == torch.bfloat16
    assert pick_dtype("auto", skylake, "AVX512") == torch.float32
    assert pick_dtype("auto", zen4, "AVX2") == torch.float32  # PyTorch held below AVX-512
    assert pick_dtype("bfloat16", skylake, "AVX2") == torch.bfloat16  # asked for: given
    assert pick_dtype("float32", zen4, "AVX512") == torch.float32
