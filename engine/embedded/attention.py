"""Attention over the slot KV pool: ``attend``, used by the fused runner (``fused.py``) and,
through transformers' attention interface (``pool_attention``), by the stock forward.

One forward pass runs a *packed* step: first the decode queries, one new token for each of pool
rows ``0 .. rows - 1`` (the decoding requests) and then each request's speculative drafts (on
its own row, at the positions after its new token), followed by prefill segments (a run of
prompt tokens for one slot each). The forward computes the projections, rotary embeddings
and MLPs for all tokens together (one GEMM per weight); ``attend`` stores each token's key
and value in its slot and attends per request:
- decode queries: on the native kernels (``native.py``), each over its own row up to itself,
  reading a prompt prefix all rows share once (in float32 the AVX2 kernel, ``attention_f32.py``,
  which reads each row's own copy); else in one batched matmul over the rows' padded width,
  with an additive mask. A draft is a decode query rather than a segment: a segment repacks
  its row's whole prefix in every layer, which costs a single stream 20% a step and eight
  streams 2x (measured), where a decode query reads the row in place;
- each prefill segment over its slot's prefix plus itself, causally: on the native kernels
  where they are loaded (AVX-512 or AMX, as the step's ``PrefillRoute`` says; the AVX-512
  kernel loses to SDPA on CPUs with AMX, and may be routed there; in float32 the AVX2 kernel,
  ``attention_f32.NativePrefillF32``, the step's ``prefiller``); else SDPA for long segments,
  matmul attention for short ones.
Hand-written matmul attention is used for decode because CPU SDPA in bfloat16 is ~10x slower
for a single query token (measured on this machine).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from engine.embedded.attention_routes import (
    NATIVE_PREFILL,
    SHORT_SEGMENT,
    DecodeKernel,
    PrefillKernel,
    PrefillRoute,
)
from engine.embedded.kv_pool import KVPool
from engine.embedded.native import NativeKernels

ATTN_NAME = "embedded_pool"


@dataclass
class Segment:
    """``count`` prompt tokens for ``slot``, at positions ``start .. start + count - 1``."""

    slot: int
    start: int
    count: int
    # additive causal mask [count, start + count] for an SDPA segment after a prefix; built
    # once per step by ``make_plan`` (SDPA would otherwise convert a boolean mask every layer)
    mask: torch.Tensor | None = None
    # how it attends: one of ``PREFILL_PATHS`` or "matmul"; set by ``make_plan``
    path: str = ""


@dataclass
class StepPlan:
    pool: KVPool
    n_decode: int  # decode queries: the decoding rows' new tokens, then their drafts
    decode_pos: torch.Tensor  # [n_decode] long: each query's position in its row
    decode_mask: torch.Tensor | None  # [rows, capacity] float, 0 attend, -inf hidden: no kernel
    segments: list[Segment]
    # attention runs on these kernels when set (they mask causally by themselves)
    kernel: NativeKernels | None = None
    decode_lengths: torch.Tensor | None = None  # [n_decode] int32: keys seen, itself included
    # positions 0 .. decode_shared - 1 hold the same prompt tokens in every decoding row
    decode_shared: int = 0
    # the pool row of each decode query ([n_decode] long), and as int32 for the kernel; None
    # when query i is row i's new token and there are no drafts
    decode_rows: torch.Tensor | None = None
    decode_slots: torch.Tensor | None = None
    # each row's drafts as (first query index, segment): without the kernel they attend as a
    # short causal segment of their row (gathering whole rows per query would copy them all)
    draft_runs: list[tuple[int, Segment]] | None = None
    # decode queries attend on this when set: ``kernel``, or a decode-only kernel without it
    decoder: DecodeKernel | None = None
    # prefill segments routed "native" or "amx" attend on this: ``kernel``, or a prefill
    # kernel without it (float32, AVX2)
    prefiller: PrefillKernel | None = None


def make_plan(
    pool: KVPool,
    n_decode: int,
    segments: list[Segment],
    kernel: NativeKernels | None = None,
    shared: int = 0,
    drafts: Sequence[tuple[int, int]] = (),
    route: PrefillRoute = NATIVE_PREFILL,
    decoder: DecodeKernel | None = None,
    prefiller: PrefillKernel | None = None,
) -> StepPlan:
    """Plan a step; decoding rows are pool rows ``0 .. n_decode - 1`` at their current lengths.
    Grows the pool first if a row would overflow it (the decode mask spans its capacity).
    ``kernel``: the native kernels, which the caller has checked support the pool's dtype and
    head size (``NativeKernels.supports``); ``shared``: the decoding rows' prompts begin with
    this many identical tokens (their KV is read once); ``drafts``: ``(row, count)`` pairs,
    ``count`` draft tokens of decoding row ``row`` after its new token, as decode queries in
    that order; ``route``: where each prefill segment attends when the kernels are loaded;
    ``decoder``: where decode queries attend (checked like ``kernel``; default ``kernel``);
    ``prefiller``: where prefill segments attend on the route's native paths (checked like
    ``kernel``; default ``kernel``; without either, SDPA and matmul attention)."""
    decoder = decoder if decoder is not None else kernel
    prefiller = prefiller if prefiller is not None else kernel
    lengths = pool.lengths[:n_decode]
    rows, pos = list(range(n_decode)), list(lengths)
    runs: list[tuple[int, Segment]] = []
    for row, count in drafts:
        runs.append((len(pos), Segment(row, lengths[row] + 1, count)))
        rows += [row] * count
        pos += range(lengths[row] + 1, lengths[row] + 1 + count)
    pool.ensure(max([p + 1 for p in pos] + [s.start + s.count for s in segments]))
    mask = None
    if n_decode and decoder is None:  # the decoding rows' new tokens (drafts: ``draft_runs``)
        cols = torch.arange(pool.capacity).unsqueeze(0)
        mask = torch.zeros((n_decode, pool.capacity), dtype=torch.float32)
        mask.masked_fill_(cols > torch.tensor(lengths).unsqueeze(1), float("-inf"))
    for seg in segments:
        seg.path = _segment_path(prefiller, route, seg.count)
        if seg.path == "sdpa" and seg.start:
            seg.mask = causal_mask(seg, pool.dtype)
    drafted = len(rows) > n_decode
    return StepPlan(
        pool=pool,
        n_decode=len(pos),
        decode_pos=torch.tensor(pos, dtype=torch.long),
        decode_mask=mask,
        segments=segments,
        kernel=kernel,
        decode_lengths=torch.tensor(pos, dtype=torch.int32) + 1,
        decode_shared=min([shared, *lengths]) if n_decode > 1 else 0,
        decode_rows=torch.tensor(rows, dtype=torch.long) if drafted else None,
        decode_slots=torch.tensor(rows, dtype=torch.int32) if drafted else None,
        draft_runs=runs if drafted and decoder is None else None,
        decoder=decoder,
        prefiller=prefiller,
    )


def causal_mask(seg: Segment, dtype: torch.dtype) -> torch.Tensor:
    """Additive mask ``[count, start + count]``: 0 where a query sees a key, -inf after it."""
    end = seg.start + seg.count
    hidden = torch.arange(end).unsqueeze(0) > torch.arange(seg.start, end).unsqueeze(1)
    return torch.zeros(hidden.shape, dtype=dtype).masked_fill_(hidden, float("-inf"))


def _segment_path(prefiller: PrefillKernel | None, route: PrefillRoute, count: int) -> str:
    if prefiller is not None:
        return route.path(count)
    return "matmul" if count <= SHORT_SEGMENT else "sdpa"


def positions(plan: StepPlan) -> torch.Tensor:
    """Position ids ``[1, N]`` of the packed tokens."""
    parts = [plan.decode_pos] + [
        torch.arange(s.start, s.start + s.count, dtype=torch.long) for s in plan.segments
    ]
    return torch.cat(parts).unsqueeze(0)


def pool_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,  # unused: the plan carries the masks
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' attention hook: ``query`` ``[1, Hq, N, D]``, ``key``/``value``
    ``[1, Hkv, N, D]`` (new tokens only); returns ``[1, N, Hq, D]``."""
    dim = query.shape[3]
    scale = scaling if scaling is not None else dim**-0.5
    return attend(kwargs["pool_plan"], module.layer_idx, query, key, value, scale), None


def attend(
    plan: StepPlan,
    layer: int,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    scale: float,
    need: list[int] | None = None,
) -> torch.Tensor:
    """Store the new tokens' KV of ``layer`` in their slots and attend; shapes as in
    ``pool_attention`` (views are fine). ``need``: the ascending token indices whose outputs
    are wanted (the rest are dead: the model's last layer, where only kept logits count);
    every token's KV is still stored, and ``[1, len(need), Hq, D]`` is returned. A prefill
    segment then attends only from its first needed query on, and not at all without one."""
    cache_k, cache_v = plan.pool.keys[layer], plan.pool.values[layer]
    hq, n_tokens, dim = query.shape[1], query.shape[2], query.shape[3]
    out = query.new_empty((1, n_tokens, hq, dim))
    n = plan.n_decode
    if n:
        rows = torch.arange(n) if plan.decode_rows is None else plan.decode_rows
        cache_k[rows, :, plan.decode_pos] = key[0, :, :n].transpose(0, 1)
        cache_v[rows, :, plan.decode_pos] = value[0, :, :n].transpose(0, 1)
        q = query[0, :, :n].transpose(0, 1)  # [n, Hq, D]
        if plan.decoder is not None:
            lengths, shared, slots = plan.decode_lengths, plan.decode_shared, plan.decode_slots
            plan.decoder.decode(q, cache_k, cache_v, lengths, shared, out[0, :n], scale, slots)
        else:
            n_rows = len(plan.decode_mask) if plan.decode_mask is not None else 0
            if n_rows:
                out[0, :n_rows] = _decode_matmul(
                    q[:n_rows], cache_k[:n_rows], cache_v[:n_rows], plan.decode_mask, scale
                )
            for first, seg in plan.draft_runs or ():
                end, last = seg.start + seg.count, first + seg.count
                k, v = (
                    cache_k[seg.slot : seg.slot + 1, :, :end],
                    cache_v[seg.slot : seg.slot + 1, :, :end],
                )
                out[0, first:last] = _short_segment(query[:, :, first:last], k, v, seg, scale)
    offset = n
    for seg in plan.segments:
        end = seg.start + seg.count
        cache_k[seg.slot, :, seg.start : end] = key[0, :, offset : offset + seg.count]
        cache_v[seg.slot, :, seg.start : end] = value[0, :, offset : offset + seg.count]
        first = offset if need is None else _first_needed(need, offset, offset + seg.count)
        if first is not None:
            # the queries from ``first`` on attend as a segment of their own: a query's output
            # does not depend on which queries before it run in the same call
            part = seg if first == offset else _tail(seg, first - offset)
            _attend_segment(plan, query[:, :, first : offset + seg.count], cache_k, cache_v,
                            part, out[0, first : offset + seg.count], scale)  # fmt: skip
        offset += seg.count
    return out if need is None else out[:, need]


def _first_needed(need: list[int], lo: int, hi: int) -> int | None:
    """The least index in ``need`` within ``[lo, hi)``, or None."""
    at = bisect.bisect_left(need, lo)
    return need[at] if at < len(need) and need[at] < hi else None


def _tail(seg: Segment, skip: int) -> Segment:
    """``seg`` without its first ``skip`` queries (an SDPA tail builds its own mask)."""
    return Segment(seg.slot, seg.start + skip, seg.count - skip, path=seg.path)


def _attend_segment(
    plan: StepPlan,
    q: torch.Tensor,
    cache_k: torch.Tensor,
    cache_v: torch.Tensor,
    seg: Segment,
    dest: torch.Tensor,
    scale: float,
) -> None:
    """Causal attention of a segment's queries ``q`` ``[1, Hq, count, D]`` over its slot's
    keys up to itself, into ``dest`` ``[count, Hq, D]``."""
    end = seg.start + seg.count
    k = cache_k[seg.slot : seg.slot + 1, :, :end]
    v = cache_v[seg.slot : seg.slot + 1, :, :end]
    if seg.path in ("native", "amx") and plan.prefiller is not None:
        plan.prefiller.prefill(q[0], k[0], v[0], dest, seg.start, scale, seg.path == "amx")
    elif seg.path == "matmul":
        dest.copy_(_short_segment(q, k, v, seg, scale))
    else:
        dest.copy_(sdpa_segment(q, k, v, seg, scale)[0].transpose(0, 1))


def _decode_matmul(
    q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, scale: float
) -> torch.Tensor:
    """Decode rows in one batched matmul over whole pool rows (``keys`` ``[n, Hkv, cap, D]``
    is contiguous: a narrower view would be copied by matmul); returns ``[n, Hq, D]``."""
    n, hq, dim = q.shape
    hkv = keys.shape[1]
    scores = torch.matmul(q.reshape(n, hkv, hq // hkv, dim), keys.transpose(-1, -2)).float()
    scores = scores * scale + mask[:, None, None, :]
    probs = torch.softmax(scores, dim=-1).to(q.dtype)
    return torch.matmul(probs, values).reshape(n, hq, dim)  # [n, Hkv, G, D] -> [n, Hq, D]


def sdpa_segment(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seg: Segment, scale: float
) -> torch.Tensor:
    """PyTorch's attention for a segment (``[1, Hq, count, D]``): a long one without the
    kernels, or any the step's ``PrefillRoute`` sends here."""
    gqa = q.shape[1] != k.shape[1]
    if seg.start and seg.mask is None:  # a plan not built by ``make_plan``: mask it here
        seg.mask = causal_mask(seg, q.dtype)
    if seg.start == 0:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=gqa)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=seg.mask, scale=scale, enable_gqa=gqa)


def _short_segment(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seg: Segment, scale: float
) -> torch.Tensor:
    """Matmul attention for a few queries over a long prefix (``[count, Hq, D]``)."""
    hq, count, dim = q.shape[1], q.shape[2], q.shape[3]
    hkv, end = k.shape[1], k.shape[2]
    groups = hq // hkv
    scores = torch.matmul(q[0].reshape(hkv, groups * count, dim), k[0].transpose(-1, -2))
    scores = scores.float().view(hkv, groups, count, end).mul_(scale)
    hidden = torch.arange(end).unsqueeze(0) > torch.arange(seg.start, end).unsqueeze(1)
    scores.masked_fill_(hidden, float("-inf"))
    probs = torch.softmax(scores, dim=-1).to(q.dtype).view(hkv, groups * count, end)
    ctx = torch.matmul(probs, v[0])  # [Hkv, G * count, D]
    return ctx.view(hq, count, dim).transpose(0, 1)


def install(model: torch.nn.Module) -> None:
    """Register ``pool_attention`` and switch ``model`` to it."""
    from transformers import AttentionInterface

    AttentionInterface.register(ATTN_NAME, pool_attention)
    model.config._attn_implementation = ATTN_NAME
    for sub in model.modules():
        cfg = getattr(sub, "config", None)
        if cfg is not None and cfg is not model.config:
            cfg._attn_implementation = ATTN_NAME


@torch.inference_mode()
def run_step(model: torch.nn.Module, tokens: list[int], plan: StepPlan, keep: list[int]):  # noqa: ANN201
    """One packed forward; returns logits ``[len(keep), vocab]`` for the token indices ``keep``."""
    total = sum(s.count for s in plan.segments) + plan.n_decode
    assert len(tokens) == total
    out = model(
        input_ids=torch.tensor([tokens]),
        position_ids=positions(plan),
        # a 4-D mask passes through transformers' mask builder untouched; attention ignores it
        attention_mask=torch.zeros((1, 1, 1, 1)),
        use_cache=False,
        logits_to_keep=torch.tensor(keep, dtype=torch.long),
        pool_plan=plan,
    )
    advance(plan)
    return out.logits[0]


def advance(plan: StepPlan) -> None:
    """After a step's forward: every row it wrote is that much longer."""
    if plan.decode_rows is None:
        for i in range(plan.n_decode):
            plan.pool.lengths[i] += 1
    else:  # a row's drafts come after its new token: the last one written sets its length
        for row, at in zip(plan.decode_rows.tolist(), plan.decode_pos.tolist(), strict=True):
            plan.pool.lengths[row] = at + 1
    for seg in plan.segments:
        plan.pool.lengths[seg.slot] = seg.start + seg.count
