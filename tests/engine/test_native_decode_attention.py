"""The native decode attention (``decode_attention`` in ``kernels/attention.c``): single-token
queries over the slot KV pool, a request's drafts on its own row, a shared prompt prefix read
once; checked against PyTorch's float32 attention and against each query decoded alone."""

from __future__ import annotations

import pytest
import torch
from support.native_attention import built_kernel, needs_kernel, reference_attention

from engine.embedded.native import NativeKernels

# every decode test runs on the AVX-512 kernel, and on the AMX tiles where they run
AMX_OR_NOT = pytest.mark.parametrize("amx", [False, True], ids=["avx512", "amx"])


def skip_unless_amx_runs(kernel: NativeKernels, amx: bool, dim: int) -> None:
    if amx and not kernel.amx_prefill_supports(dim):
        pytest.skip("the AMX decode attention needs AMX tiles and head_dim 64")


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> NativeKernels:
    return built_kernel(tmp_path_factory)


@needs_kernel
@pytest.mark.parametrize(
    ("lengths", "shared", "hq", "hkv", "dim"),
    [
        ([1600, 1650, 1601, 1700, 1622, 1603, 1640, 1611], 1500, 9, 3, 64),  # a RAG batch
        ([40, 300, 129], 0, 9, 3, 64),  # nothing shared: every row alone
        ([70, 71], 64, 4, 1, 128),  # the shared prefix ends on a key block boundary
        ([90, 130, 85], 80, 16, 2, 64),  # 8 query heads per KV head: more than one tile
        ([5], 0, 2, 2, 64),  # one row
    ],
)
@AMX_OR_NOT
def test_decode_matches_float32_attention(
    kernel: NativeKernels, lengths: list[int], shared: int, hq: int, hkv: int, dim: int, amx: bool
) -> None:
    skip_unless_amx_runs(kernel, amx, dim)
    torch.manual_seed(sum(lengths))
    n, slots, capacity = len(lengths), len(lengths) + 1, max(lengths) + 50
    keys = torch.randn(slots, hkv, capacity, dim).to(torch.bfloat16)
    values = torch.randn(slots, hkv, capacity, dim).to(torch.bfloat16)
    # the shared prefix is the same in every row, as the engine guarantees
    keys[1:, :, :shared] = keys[0, :, :shared]
    values[1:, :, :shared] = values[0, :, :shared]
    qkv = torch.randn(n, hq + 2 * hkv, dim).to(torch.bfloat16)
    q = qkv[:, :hq]  # a view, as the runner passes it
    out = torch.full((n, hq, dim), float("nan"), dtype=torch.bfloat16)
    lens = torch.tensor(lengths, dtype=torch.int32)
    kernel.decode(q, keys, values, lens, shared, out, dim**-0.5, amx=amx)
    for r, length in enumerate(lengths):
        # the row's one query at position length - 1 sees every key of its row
        ref = reference_attention(q[r].unsqueeze(1), keys[r], values[r], length - 1)[0]
        assert (out[r].float() - ref).abs().max() < 0.03, r
        assert (out[r].float() - ref).abs().mean() < 2e-3, r


@needs_kernel
@pytest.mark.parametrize(
    ("slots", "lengths", "shared"),
    [
        ([0, 0, 0, 0, 0], [600, 601, 602, 603, 604], 0),  # one stream, its token and 4 drafts
        ([0, 1, 2, 0, 0, 2], [700, 650, 720, 701, 702, 721], 512),  # a batch, two with drafts
        ([1, 0, 1], [9, 40, 10], 0),  # queries in any row order
        ([2, 0, 0, 0, 0, 0, 0, 0], [33, 16, 17, 18, 19, 20, 21, 22], 0),  # 7 on one row
    ],
)
@AMX_OR_NOT
def test_decode_queries_read_their_own_rows(
    kernel: NativeKernels, slots: list[int], lengths: list[int], shared: int, amx: bool
) -> None:
    """Speculative drafts run as decode queries on their request's row (``slots``), each
    seeing the keys up to itself: the same as float32 attention over that row, and bit for bit
    the same as the query decoded alone (the kernel reads a row's queries together; on the
    AMX tiles the queries of every row share a pass over the common prefix)."""
    skip_unless_amx_runs(kernel, amx, 64)
    torch.manual_seed(len(slots) + shared)
    hq, hkv, dim, rows = 9, 3, 64, max(slots) + 2
    keys = torch.randn(rows, hkv, max(lengths) + 30, dim).to(torch.bfloat16)
    values = torch.randn_like(keys)
    keys[1:, :, :shared] = keys[0, :, :shared]
    values[1:, :, :shared] = values[0, :, :shared]
    q = torch.randn(len(slots), hq + 2 * hkv, dim).to(torch.bfloat16)[:, :hq]
    out = torch.full(q.shape, float("nan"), dtype=torch.bfloat16)
    at = torch.tensor(slots, dtype=torch.int32)
    lens = torch.tensor(lengths, dtype=torch.int32)
    kernel.decode(q, keys, values, lens, shared, out, dim**-0.5, at, amx=amx)
    for i, (slot, length) in enumerate(zip(slots, lengths, strict=True)):
        ref = reference_attention(q[i].unsqueeze(1), keys[slot], values[slot], length - 1)[0]
        assert (out[i].float() - ref).abs().max() < 0.03, i
        alone = torch.empty_like(out[i : i + 1])
        one = torch.tensor([length], dtype=torch.int32)
        kernel.decode(q[i : i + 1], keys, values, one, 0, alone, dim**-0.5, at[i : i + 1], amx=amx)
        assert torch.equal(out[i : i + 1], alone), i
    for row in (-1, len(keys)):  # a row outside the pool is refused, and nothing is written
        bad = torch.tensor([row] + slots[1:], dtype=torch.int32)
        before = out.clone()
        with pytest.raises(ValueError, match="range"):
            kernel.decode(q, keys, values, lens, 0, out, 1.0, bad, amx=amx)
        assert torch.equal(out, before)


@needs_kernel
@pytest.mark.parametrize(
    ("hq", "hkv", "dim"),
    [(9, 3, 64), (14, 2, 64), (16, 1, 128), (8, 8, 64), (32, 2, 128)],
    ids=["smollm2", "qwen2-0.5b", "16-per-kv-head", "multi-head", "wide-groups"],
)
@pytest.mark.parametrize("seed", range(3))
@AMX_OR_NOT
def test_decode_batches_of_requests_with_drafts_match_each_query_alone(
    kernel: NativeKernels, hq: int, hkv: int, dim: int, seed: int, amx: bool
) -> None:
    """Random batches as the scheduler packs them (each request's pending token, then every
    request's drafts, a shared prompt prefix or none), for head groups that fit an item of
    the kernel's and ones that span several: each query matches float32 attention over its
    row and equals, bit for bit, itself decoded alone. The shared prefix is none, shorter
    than a key block of the AMX kernel's or longer (its first pass runs whole blocks)."""
    skip_unless_amx_runs(kernel, amx, dim)
    gen = torch.Generator().manual_seed(seed * 100 + hq)
    requests = int(torch.randint(1, 6, (1,), generator=gen))
    shared = (0, 40, 130)[int(torch.randint(0, 3, (1,), generator=gen))]
    rows = list(range(requests))
    base = [shared + int(torch.randint(1, 90, (1,), generator=gen)) for _ in rows]
    drafts = [int(torch.randint(0, 6, (1,), generator=gen)) for _ in rows]
    slots = rows + [r for r in rows for _ in range(drafts[r])]
    lengths = base + [base[r] + 1 + i for r in rows for i in range(drafts[r])]
    capacity = max(lengths) + 8
    keys = torch.randn(requests, hkv, capacity, dim, generator=gen).to(torch.bfloat16)
    values = torch.randn(requests, hkv, capacity, dim, generator=gen).to(torch.bfloat16)
    keys[1:, :, :shared] = keys[0, :, :shared]
    values[1:, :, :shared] = values[0, :, :shared]
    n = len(slots)
    q = torch.randn(n, hq, dim, generator=gen).to(torch.bfloat16)
    out = torch.full_like(q, float("nan"))
    at = torch.tensor(slots, dtype=torch.int32)
    lens = torch.tensor(lengths, dtype=torch.int32)
    kernel.decode(q, keys, values, lens, shared if requests > 1 else 0, out, dim**-0.5, at, amx)
    for i in range(n):
        ref = reference_attention(
            q[i].unsqueeze(1), keys[slots[i]], values[slots[i]], lengths[i] - 1
        )[0]
        assert (out[i].float() - ref).abs().max() < 0.03, i
        alone = torch.empty_like(out[i : i + 1])
        kernel.decode(
            q[i : i + 1], keys, values, lens[i : i + 1], 0, alone, dim**-0.5, at[i : i + 1], amx
        )
        assert torch.equal(out[i : i + 1], alone), i
