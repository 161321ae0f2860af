"""``engine/embedded/calibrate.py``: timing two exact implementations and routing work to the
faster, on real timings (sleeps of known length, and the real kernels against SDPA)."""

from __future__ import annotations

import time
import uuid

import pytest
import torch

from engine.embedded import calibrate
from engine.embedded.attention_routes import NATIVE_PREFILL, PrefillRoute
from engine.embedded.gemv import GemvSwitch
from engine.embedded.native import load_native_kernels, unsupported_reason

REASON = unsupported_reason()


def test_fastest_times_every_option_and_names_the_quickest() -> None:
    options = {
        "slow": lambda: time.sleep(0.004),
        "fast": lambda: None,
        "mid": lambda: time.sleep(0.002),
    }
    medians = calibrate.time_each(options, reps=3)
    assert medians["slow"] >= 0.004 > medians["mid"] >= 0.002 > medians["fast"]
    assert calibrate.fastest("sleeps", options) == "fast"
    # a kept option stays unless another is clearly faster
    near = {"kept": lambda: time.sleep(0.004), "other": lambda: time.sleep(0.0036)}
    assert calibrate.fastest("sleeps", near, keep="kept", edge=0.5) == "kept"
    assert calibrate.fastest("sleeps", options, keep="slow", edge=0.85) == "fast"


def _linears(switch: GemvSwitch, per_row_s: float, onednn_s: float):  # noqa: ANN202
    """A step's linears: the GEMV costs ``per_row_s`` a row, oneDNN a flat ``onednn_s``."""
    seen: list[tuple[int, bool]] = []

    def run(rows: int) -> None:
        seen.append((rows, switch.on))
        time.sleep(rows * per_row_s if switch.on else onednn_s)

    run.seen = seen  # type: ignore[attr-defined]
    return run


def test_gemv_wins_over_the_step_mix_or_not_at_all() -> None:
    # steps of 1, 5, 8, 16 and 128 rows: GEMV 0.02 ms a row (3.2 ms) against 2 ms flat (10 ms)
    switch = GemvSwitch(on=False)
    run = _linears(switch, 0.00002, 0.002)
    assert calibrate.gemv_wins(run, switch, ("test", uuid.uuid4().hex))
    assert switch.on
    assert {rows for rows, _ in run.seen} == set(calibrate.LINEAR_STEPS)
    # each side takes whole mixes, never a part of one
    for at in range(0, len(run.seen), len(calibrate.LINEAR_STEPS)):
        assert len({on for _, on in run.seen[at : at + len(calibrate.LINEAR_STEPS)]}) == 1
    # oneDNN a little faster (7 ms against 7.9): not enough to give up the GEMV
    switch = GemvSwitch(on=False)
    close = _linears(switch, 0.00005, 0.0014)
    assert calibrate.gemv_wins(close, switch, ("test", uuid.uuid4().hex)) and switch.on
    # GEMV 0.1 ms a row (16 ms) against 1 ms flat (5 ms): oneDNN for every step
    key = ("test", uuid.uuid4().hex)
    switch = GemvSwitch()
    assert not calibrate.gemv_wins(_linears(switch, 0.0001, 0.001), switch, key)
    assert not switch.on
    # the same shapes again in this process: no timing, the same answer, set on the new switch
    other = GemvSwitch()
    again = _linears(other, 0.0, 1.0)
    assert not calibrate.gemv_wins(again, other, key)
    assert not other.on and again.seen == []


def test_the_winners_time_for_each_step_size_is_kept_for_the_draft_budget() -> None:
    # the GEMV 0.1 ms a row, oneDNN 5 ms flat: the GEMV wins the mix (15.8 ms against 25),
    # and its own times per step size are kept
    switch = GemvSwitch(on=False)
    key = ("test", uuid.uuid4().hex)
    assert calibrate.linear_costs(key) is None
    assert calibrate.gemv_wins(_linears(switch, 0.0001, 0.005), switch, key)
    costs = calibrate.linear_costs(key)
    assert costs is not None and costs.rows == calibrate.LINEAR_STEPS
    for rows, seconds in zip(costs.rows, costs.seconds, strict=True):
        assert 0.0001 * rows <= seconds < 0.0001 * rows + 0.003, rows
    # oneDNN wins: its flat times are kept
    switch = GemvSwitch()
    key = ("test", uuid.uuid4().hex)
    assert not calibrate.gemv_wins(_linears(switch, 0.001, 0.002), switch, key)
    costs = calibrate.linear_costs(key)
    assert costs is not None and all(0.002 <= s < 0.005 for s in costs.seconds)


@pytest.mark.skipif(REASON is not None, reason=f"native kernel cannot run: {REASON}")
def test_prefill_route_times_the_real_kernels_once_per_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kernels = load_native_kernels(None)
    assert kernels is not None
    timed: list[set[str]] = []
    real = calibrate.fastest

    def recording(what: str, options: dict, **kw) -> str:  # noqa: ANN001, ANN003
        timed.append(set(options))
        return real(what, options, **kw)

    monkeypatch.setattr(calibrate, "fastest", recording)
    monkeypatch.setattr(calibrate, "_memo", {})
    route = calibrate.prefill_route(kernels, 9, 3, 64)
    # both segment kinds, over every path that runs here (AMX only on a CPU with the tiles)
    expected = {"native", "sdpa"} | ({"amx"} if kernels.amx_prefill_supports(64) else set())
    assert timed == [expected, expected]
    assert route.long in expected and route.short in expected
    assert calibrate.prefill_route(kernels, 9, 3, 64) is route and len(timed) == 2  # memo


@pytest.mark.skipif(REASON is not None, reason=f"native kernel cannot run: {REASON}")
def test_decode_on_amx_times_both_kernels_over_the_mix_once_per_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the tiles run, both decode kernels are timed on every step of ``DECODE_MIX``
    and the faster mix wins for good (memoised); elsewhere nothing is timed and the AVX-512
    kernel keeps every decode step."""
    kernels = load_native_kernels(None)
    assert kernels is not None
    timed: list[tuple[str, dict[str, float]]] = []
    real = calibrate.logged_medians

    def recording(what: str, options: dict, reps: int = calibrate.REPS) -> dict[str, float]:  # noqa: ANN001
        medians = real(what, options, reps)
        timed.append((what, medians))
        return medians

    monkeypatch.setattr(calibrate, "logged_medians", recording)
    monkeypatch.setattr(calibrate, "_memo", {})
    on_amx = calibrate.decode_on_amx(kernels, 9, 3, 64)
    if not kernels.amx_prefill_supports(64):
        assert not on_amx and timed == []
        return
    ((what, medians),) = timed
    assert set(medians) == {"avx512", "amx"}
    assert all(str(step) in what for step in calibrate.DECODE_MIX)
    assert on_amx == (medians["amx"] < medians["avx512"])
    assert calibrate.decode_on_amx(kernels, 9, 3, 64) is on_amx and len(timed) == 1  # memo
    assert not calibrate.decode_on_amx(kernels, 4, 1, 128)  # the tiles take head_dim 64 only


def test_amx_step_wins_unless_onednn_is_clearly_faster() -> None:
    """The decode-only native step on the tiles is timed against oneDNN's layer loop over
    ``AMX_STEP_ROWS`` (every size on each side in turn) and kept unless oneDNN is clearly
    faster; a refusal (no tiles) counts as a loss, and each answer is kept per process."""
    seen: list[tuple[int, bool]] = []

    def run(tiles_per_row: float, onednn: float):  # noqa: ANN202
        def linears(rows: int, amx: bool) -> None:
            seen.append((rows, amx))
            time.sleep(rows * tiles_per_row if amx else onednn)

        return linears

    # the tiles a little slower (70 rows x 0.08 ms = 5.6 ms against 5 x 1.1): kept, the one
    # call saves more
    key = ("test", uuid.uuid4().hex)
    assert calibrate.amx_step_wins(run(0.00008, 0.0011), key)
    assert {rows for rows, _ in seen} == set(calibrate.AMX_STEP_ROWS)
    assert calibrate.amx_step_wins(run(1.0, 0.0), key)  # memoised: not timed again
    # oneDNN well ahead (5 ms against 14): the layer loop stays
    assert not calibrate.amx_step_wins(run(0.0002, 0.001), ("test", uuid.uuid4().hex))

    def refused(rows: int, amx: bool) -> None:
        if amx:
            raise RuntimeError("attention kernel: Linux did not grant this process AMX tiles")

    assert not calibrate.amx_step_wins(refused, ("test", uuid.uuid4().hex))


def test_prefill_route_paths_and_summary() -> None:
    assert NATIVE_PREFILL.summary() == "prefill attention on native"
    assert PrefillRoute("amx", "amx").summary() == "prefill attention on amx"
    assert PrefillRoute("native", "sdpa").summary() == (
        "long prefill segments on native, short on sdpa"
    )
    route = PrefillRoute("sdpa", "amx")
    assert route.path(128) == "amx" and route.path(129) == "sdpa"
    with pytest.raises(ValueError, match="prefill route"):
        PrefillRoute("cuda", "sdpa")


def test_a_row_is_computed_alike_in_a_step_of_any_size() -> None:
    """What makes ``gemv_wins`` all or nothing safe: a row's output does not depend on how many
    rows share its step (so drafts, neighbours and prompt chunks leave greedy text be). The
    GEMV is checked up to a prompt chunk's size; oneDNN up to a decode step's (on an AMX Xeon
    its 1-row and 619-row products rounded apart, which is why it is not the decode side
    where the GEMV runs)."""
    from engine.embedded.gemv import NativeGemv
    from engine.embedded.linear import make_linear, packing_available

    if REASON is not None or not packing_available(torch.bfloat16):
        pytest.skip(f"no native GEMV or prepacked linears here: {REASON}")
    kernels = load_native_kernels(None)
    assert kernels is not None
    gemv = NativeGemv(kernels.library)
    torch.manual_seed(3)
    for outputs, inputs in ((960, 576), (3072, 576), (576, 1536)):  # SmolLM2's own shapes
        w = torch.randn(outputs, inputs).bfloat16()
        x = torch.randn(512, inputs).bfloat16()
        for on, most in ((True, 512), (False, 32)):
            linear = make_linear(w, None, True, gemv, GemvSwitch(on=on))
            whole = linear(x[:most])
            for size in (1, 2, 5, 8, 16, 24, 100, 333):
                if size <= most:
                    assert torch.equal(linear(x[:size]), whole[:size]), (outputs, on, size)
            # a row after others is computed as it is alone
            assert torch.equal(linear(x[most - 1 : most]), whole[most - 1 :]), (outputs, on)
