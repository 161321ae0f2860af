"""Which of several exact implementations runs fastest on this machine, timed once per process.

The native AVX-512 kernels were written for a CPU with AVX-512 BF16 and no AMX (a 2-core Zen 4 VM):
there the native prefill attention runs ~2x PyTorch's SDPA and the native GEMV beats oneDNN's GEMM
on decode steps and keeps pace on prefill. A CPU with AMX tiles turns that around, because oneDNN's
GEMM and PyTorch's flash attention run on the tiles. On a 2-core Xeon with AMX, SDPA prefill ran
2.2-3.2x faster than the AVX-512 kernel (and the native AMX kernel, ``attention_amx.c``, 1.6x
faster than SDPA), and oneDNN beat the GEMV from 4 rows on (1.7x at 8 rows, 2.9x at 32). So the
engine times the candidates on the model's own shapes when it loads and routes each kind of work to
the fastest. All compute the same function (bfloat16 products, fp32 accumulation in different
orders): the choice changes speed, and answers only in last-bit ties, the same way on every step of
a process, for a step of any size (``gemv_wins``).

Timings take turns between the candidates, so drift on a shared VM hits all alike, and compare
medians. Results are kept per process and shape: engines built later in the same process
(tests, the bench) reuse them, so they route alike and start faster.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable

import torch

from engine.embedded.attention import Segment, causal_mask, sdpa_segment
from engine.embedded.attention_routes import PrefillKernel, PrefillRoute
from engine.embedded.draft_budget import StepCosts
from engine.embedded.gemv import GemvSwitch
from engine.embedded.native import NativeKernels

log = logging.getLogger(__name__)

# the prefill shapes timed: a long prompt segment from position 0, and a short follow-up
# question after a cached prefix (the two kinds of segment ``PrefillRoute`` separates)
LONG_SEGMENT = (0, 512)
SHORT_AFTER = (1024, 32)
# steps timed for the GEMV: one stream alone, with 4 drafts, 8 streams, 8 with drafts, and a
# piece of a prompt (the GEMV takes prefill too, where it wins: ``GemvSwitch``); the winner's
# times are also the step costs the draft budget interpolates (``draft_budget.py``)
LINEAR_STEPS = (1, 5, 8, 16, 128)
REPS = 5
# decode steps timed for the decode attention, as (streams, keys each, drafts each, keys all
# streams share): RAG streams without and with drafts, sharing their documents or not, and a
# lone stream without and with drafts (one layer each; a step runs every layer alike)
DECODE_MIX = (
    (8, 1600, 0, 0),
    (8, 1600, 4, 0),
    (8, 1600, 2, 1500),
    (1, 1600, 0, 0),
    (1, 1600, 4, 0),
)
# oneDNN takes the linears only when its mix runs in under this share of the GEMV's time. The
# GEMV side is worth more than its linears' time: decode steps then run in one native call
# (~30% faster on Zen 4), and every step computes a row alike. And a choice made on timings
# alone flipped under load on Zen 4 (GEMV 137 ms against oneDNN 158 ms on a quiet box), and
# with it every greedy answer's last bits; on an AMX Xeon oneDNN runs the mix 2-3x faster.
ONEDNN_EDGE = 0.85
# the native prefill kernel keeps a kind of segment unless another path runs it in under this
# share of its time: it computes a prompt alike however the prompt is cut into steps (on AVX2
# and AVX-512; SDPA rounds a segment by its length and mask), and a choice on timings alone
# flips with the load on a shared VM
PREFILL_EDGE = 0.85
# decode steps timed for the native step on the AMX tiles: one stream, with drafts, 8 streams
# and 8 with drafts
AMX_STEP_ROWS = (1, 5, 8, 16, 40)

_memo: dict[tuple, object] = {}


def time_each(options: dict[str, Callable[[], object]], reps: int = REPS) -> dict[str, float]:
    """Median seconds of each option: one warm-up each, then ``reps`` rounds running every
    option once in turn (drift on a shared VM hits all alike)."""
    for fn in options.values():
        fn()
    runs: dict[str, list[float]] = {name: [] for name in options}
    for _ in range(reps):
        for name, fn in options.items():
            start = time.perf_counter()
            fn()
            runs[name].append(time.perf_counter() - start)
    return {name: sorted(ts)[len(ts) // 2] for name, ts in runs.items()}


def logged_medians(
    what: str, options: dict[str, Callable[[], object]], reps: int = REPS
) -> dict[str, float]:
    """``time_each``'s medians, logged under ``what``."""
    medians = time_each(options, reps)
    log.info(
        "calibration, %s: %s",
        what,
        ", ".join(f"{name} {s * 1e3:.2f} ms" for name, s in medians.items()),
    )
    return medians


def _medians_where_it_runs(
    what: str, options: dict[str, Callable[[], object]], probe: str, reps: int = REPS
) -> dict[str, float] | None:
    """``logged_medians`` of ``options`` once ``options[probe]`` has run; None (logged)
    where it raises ``RuntimeError`` (e.g. Linux refused this process the AMX tile state)."""
    try:
        options[probe]()
    except RuntimeError as exc:
        log.info("%s: %s unavailable: %s", what, probe, exc)
        return None
    return logged_medians(what, options, reps)


def fastest(
    what: str, options: dict[str, Callable[[], object]], keep: str | None = None, edge: float = 1.0
) -> str:
    """The name of the fastest option (``time_each``); logs every median. ``keep``: that option
    unless another runs in under ``edge`` of its time."""
    medians = logged_medians(what, options)
    best = min(medians, key=medians.__getitem__)
    if keep is not None and medians[best] >= edge * medians[keep]:
        return keep
    return best


def prefill_route(
    kernels: PrefillKernel,
    q_heads: int,
    kv_heads: int,
    head_dim: int,
    dtype: torch.dtype = torch.bfloat16,
) -> PrefillRoute:
    """The fastest attention (``PREFILL_PATHS``) for long and for short prefill segments of
    this head shape in ``dtype``; the AMX kernel is timed only where it runs. The native kernel
    keeps a segment kind unless another path runs it in under ``PREFILL_EDGE`` of its time."""
    key = ("prefill", q_heads, kv_heads, head_dim, str(dtype), torch.get_num_threads())
    if key not in _memo:
        paths = [
            _fastest_segment(kernels, q_heads, kv_heads, head_dim, start, count, dtype)
            for start, count in (LONG_SEGMENT, SHORT_AFTER)
        ]
        _memo[key] = PrefillRoute(*paths)
    route = _memo[key]
    assert isinstance(route, PrefillRoute)
    return route


def _fastest_segment(
    kernels: PrefillKernel, hq: int, hkv: int, dim: int, start: int, count: int, dtype: torch.dtype
) -> str:
    gen = torch.Generator().manual_seed(0)
    end = start + count
    q = torch.randn(1, hq, count, dim, generator=gen).to(dtype)
    k = torch.randn(1, hkv, end, dim, generator=gen).to(dtype)
    v = torch.randn(1, hkv, end, dim, generator=gen).to(dtype)
    out = torch.empty(count, hq, dim, dtype=dtype)
    seg = Segment(0, start, count, path="sdpa")
    if start:
        seg.mask = causal_mask(seg, dtype)
    scale = dim**-0.5
    options: dict[str, Callable[[], object]] = {
        "native": lambda: kernels.prefill(q[0], k[0], v[0], out, start, scale),
        "sdpa": lambda: sdpa_segment(q, k, v, seg, scale),
    }
    if isinstance(kernels, NativeKernels) and kernels.amx_prefill_supports(dim):
        try:
            kernels.prefill(q[0], k[0], v[0], out, start, scale, amx=True)
            options["amx"] = lambda: kernels.prefill(q[0], k[0], v[0], out, start, scale, True)
        except RuntimeError as exc:  # e.g. Linux refused the tile state
            log.info("AMX prefill attention unavailable: %s", exc)
    what = f"prefill attention, {count} tokens after {start}"
    return fastest(what, options, keep="native", edge=PREFILL_EDGE)


def decode_on_amx(kernels: NativeKernels, q_heads: int, kv_heads: int, head_dim: int) -> bool:
    """Whether decode queries attend on the AMX tiles rather than the AVX-512 kernel here: timed
    on a mix of ``DECODE_MIX`` steps over this head shape (False where the tiles do not run).

    All or nothing, as for the linears: the two round differently, so a query must attend on
    the same kernel in every step for its answer not to depend on its company."""
    if not kernels.amx_prefill_supports(head_dim):
        return False
    key = ("decode", q_heads, kv_heads, head_dim, torch.get_num_threads())
    if key not in _memo:
        steps = [_decode_step(kernels, q_heads, kv_heads, head_dim, *s) for s in DECODE_MIX]
        medians = _medians_where_it_runs(
            "decode attention, steps of (streams, keys, drafts, shared) "
            + ", ".join(f"{s}" for s in DECODE_MIX),
            {
                "avx512": lambda: [run(False) for run in steps],
                "amx": lambda: [run(True) for run in steps],
            },
            "amx",
        )
        _memo[key] = medians is not None and medians["amx"] < medians["avx512"]
    wins = _memo[key]
    assert isinstance(wins, bool)
    return wins


def _decode_step(
    kernels: NativeKernels,
    hq: int,
    hkv: int,
    dim: int,
    streams: int,
    keys: int,
    drafts: int,
    shared: int,
) -> Callable[[bool], None]:
    """One layer's decode attention for ``streams`` rows of ``keys`` keys, each with
    ``drafts`` draft queries, the first ``shared`` keys common to all rows."""
    gen = torch.Generator().manual_seed(1)
    k = torch.randn(streams, hkv, keys + drafts, dim, generator=gen).bfloat16()
    v = torch.randn(streams, hkv, keys + drafts, dim, generator=gen).bfloat16()
    k[1:, :, :shared] = k[0, :, :shared]
    v[1:, :, :shared] = v[0, :, :shared]
    rows = list(range(streams)) + [r for r in range(streams) for _ in range(drafts)]
    lengths = [keys] * streams + [keys + 1 + i for _ in range(streams) for i in range(drafts)]
    q = torch.randn(len(rows), hq, dim, generator=gen).bfloat16()
    out = torch.empty_like(q)
    slots = torch.tensor(rows, dtype=torch.int32)
    lens = torch.tensor(lengths, dtype=torch.int32)
    scale = dim**-0.5
    return lambda amx: kernels.decode(q, k, v, lens, shared, out, scale, slots, amx=amx)


def gemv_wins(run_linears: Callable[[int], None], switch: GemvSwitch, key: tuple) -> bool:
    """Whether steps of ``LINEAR_STEPS`` rows run with their linears on the GEMV rather than on
    oneDNN, timing ``run_linears(rows)`` over that mix with ``switch`` set for each side: the
    GEMV unless oneDNN is clearly faster (``ONEDNN_EDGE``); ``switch`` is left on if so.
    ``key`` names the weights' shapes for the per-process memo. The winner's time for each
    step size is kept too (``linear_costs``).

    All or nothing, for steps of every size (``GemvSwitch`` says why): a crossover would let a
    request's greedy output depend on its neighbours and on its own drafts."""
    memo_key = ("gemv", *key, torch.get_num_threads())
    if memo_key not in _memo:
        each: dict[tuple[bool, int], list[float]] = {}

        def mix(on: bool) -> None:
            switch.on = on
            for rows in LINEAR_STEPS:
                start = time.perf_counter()
                run_linears(rows)
                each.setdefault((on, rows), []).append(time.perf_counter() - start)

        options = {"gemv": lambda: mix(True), "onednn": lambda: mix(False)}
        # fewer rounds: one mix is ~0.1 s, and the two sides differ by 10-40% where measured
        medians = logged_medians(f"linears of steps of {LINEAR_STEPS} rows", options, reps=3)
        wins = medians["onednn"] >= ONEDNN_EDGE * medians["gemv"]
        _memo[memo_key] = wins
        # the warm-up run is one of the four: the median of four is the middle two's mean
        times = tuple(statistics.median(each[(wins, rows)]) for rows in LINEAR_STEPS)
        _memo[("costs", *key, torch.get_num_threads())] = StepCosts(LINEAR_STEPS, times)
    wins = _memo[memo_key]
    assert isinstance(wins, bool)
    switch.on = wins
    return wins


def amx_step_wins(run_layer_linears: Callable[[int, bool], None], key: tuple) -> bool:
    """Whether decode-only steps run in one native call on the AMX tiles rather than through
    the runner's layer loop on oneDNN: timing the layers' linears of ``AMX_STEP_ROWS``-row
    steps on each (``run_layer_linears(rows, amx)``). The tiles win unless oneDNN is clearly
    faster (``ONEDNN_EDGE``): the one call also saves the loop's dispatch, about a quarter of
    an 8-stream decode step on a 2-vCPU AMX Xeon. ``key`` names the weights' shapes."""
    memo_key = ("amx-step", *key, torch.get_num_threads())
    if memo_key not in _memo:

        def mix(amx: bool) -> None:
            for rows in AMX_STEP_ROWS:
                run_layer_linears(rows, amx)

        medians = _medians_where_it_runs(
            f"decode steps' linears of {AMX_STEP_ROWS} rows",
            {"amx": lambda: mix(True), "onednn": lambda: mix(False)},
            "amx",
            reps=3,
        )
        _memo[memo_key] = medians is not None and medians["onednn"] >= ONEDNN_EDGE * medians["amx"]
    wins = _memo[memo_key]
    assert isinstance(wins, bool)
    return wins


def linear_costs(key: tuple) -> StepCosts | None:
    """What the linears that run took for a step of each of ``LINEAR_STEPS`` rows, as timed by
    ``gemv_wins`` for the same ``key`` in this process (None where it has not run): the step
    costs the draft budget weighs drafts by (``draft_budget.py``)."""
    costs = _memo.get(("costs", *key, torch.get_num_threads()))
    assert costs is None or isinstance(costs, StepCosts)
    return costs
