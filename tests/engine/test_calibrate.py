"""``engine/embedded/calibrate.py``: timing two exact implementations and routing work to the
faster, on real timings (sleeps of known length, and the real kernels against SDPA)."""

from __future__ import annotations

import time
import uuid

import pytest
import torch

from engine.embedded import calibrate
from engine.embedded.attention import NATIVE_PREFILL, PrefillRoute
from engine.embedded.gemv import GemvLimit
from engine.embedded.native import load_native_kernels, unsupported_reason

REASON = unsupported_reason()


def test_compare_times_both_sides_and_names_the_faster() -> None:
    slow = calibrate.compare("sleep", lambda: time.sleep(0.004), lambda: None)
    assert not slow.native_wins and slow.native_s >= 0.004 > slow.pytorch_s
    fast = calibrate.compare("sleep", lambda: None, lambda: time.sleep(0.004))
    assert fast.native_wins and "native" in fast.line() and "ms" in fast.line()


def _linears(limit: GemvLimit, per_row_s: float, onednn_s: float):  # noqa: ANN202
    """A step's linears: the GEMV costs ``per_row_s`` a row, oneDNN a flat ``onednn_s``."""

    def run(rows: int) -> None:
        time.sleep(rows * per_row_s if rows <= limit.rows else onednn_s)

    return run


def test_gemv_rows_keeps_the_largest_step_the_gemv_wins_and_stops_at_its_first_loss() -> None:
    limit = GemvLimit()
    key = ("test", uuid.uuid4().hex)
    best, timings = calibrate.gemv_rows(_linears(limit, 0.002, 0.011), limit, key)
    # GEMV 2, 4, 8, 16 ms against 11 ms: wins at 1, 2 and 4 rows, loses at 8, stops there
    assert best == 4 and limit.rows == 4
    assert [t.native_wins for t in timings] == [True, True, True, False]
    # the same shapes again in this process: no timing, the same answer, set on the new limit
    other = GemvLimit()
    assert calibrate.gemv_rows(_linears(other, 1.0, 1.0), other, key) == (4, [])
    assert other.rows == 4


def test_gemv_rows_is_zero_when_the_gemv_loses_at_one_row() -> None:
    limit = GemvLimit()
    best, timings = calibrate.gemv_rows(_linears(limit, 0.008, 0.002), limit, ("test", "zero"))
    assert best == 0 and limit.rows == 0 and len(timings) == 1


def test_a_linear_with_a_zero_limit_never_runs_the_gemv(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.embedded.gemv import NativeGemv
    from engine.embedded.linear import make_linear, packing_available

    if REASON is not None or not packing_available(torch.bfloat16):
        pytest.skip(f"no native GEMV or prepacked linears here: {REASON}")
    kernels = load_native_kernels(None)
    assert kernels is not None
    gemv = NativeGemv(kernels.library)
    calls: list[int] = []
    real = NativeGemv.__call__

    def counted(self: NativeGemv, x: torch.Tensor, panels: torch.Tensor, n: int) -> torch.Tensor:
        calls.append(x.shape[0])
        return real(self, x, panels, n)

    monkeypatch.setattr(NativeGemv, "__call__", counted)
    limit = GemvLimit(rows=0)
    w = torch.randn(64, 96).bfloat16()
    linear = make_linear(w, None, True, gemv, limit)
    x = torch.randn(3, 96).bfloat16()
    want = torch.nn.functional.linear(x.float(), w.float())
    assert (linear(x).float() - want).abs().max() <= 0.02 * want.abs().max()
    assert calls == []
    limit.rows = 3  # read at each call: the engine lowers it after the linears are built
    linear(x)
    assert calls == [3]


@pytest.mark.skipif(REASON is not None, reason=f"native kernel cannot run: {REASON}")
def test_prefill_route_times_the_real_kernels_once_per_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kernels = load_native_kernels(None)
    assert kernels is not None
    route = calibrate.prefill_route(kernels, 9, 3, 64)
    assert isinstance(route, PrefillRoute)

    def no_more_timing(*args: object) -> None:
        raise AssertionError("timed again")

    monkeypatch.setattr(calibrate, "compare", no_more_timing)
    assert calibrate.prefill_route(kernels, 9, 3, 64) == route


def test_prefill_route_summary_says_where_segments_attend() -> None:
    assert NATIVE_PREFILL.summary() == "prefill attention on the kernels"
    assert PrefillRoute(False, False).summary() == "prefill attention on SDPA"
    assert PrefillRoute(True, False).summary() == (
        "long prefill segments on the kernels, short on SDPA"
    )
    assert PrefillRoute(False, True).native(128) and not PrefillRoute(False, True).native(129)
