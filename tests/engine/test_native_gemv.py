"""The native small-batch linear (``kernels/gemv.c``, ``gemv.py``) against float32 products,
and ``make_linear``'s choice between it and oneDNN's prepacked GEMM."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine.embedded.gemv import GemvSwitch, NativeGemv
from engine.embedded.linear import make_linear, packing_available
from engine.embedded.native import load_native_kernels, unsupported_reason

REASON = unsupported_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"native kernel cannot run: {REASON}")


@pytest.fixture(scope="module")
def gemv(tmp_path_factory: pytest.TempPathFactory) -> NativeGemv:
    kernels = load_native_kernels(tmp_path_factory.mktemp("kernels"))
    assert kernels is not None
    return NativeGemv(kernels.library)


def _close(got: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> None:
    want = F.linear(x.float(), w.float())
    # fp32 accumulation, one bfloat16 rounding of the output (2^-8 relative at most)
    assert got.shape == want.shape
    assert ((got.float() - want).abs() <= 2**-8 * want.abs() + 1e-3).all()


@pytest.mark.parametrize("rows", [1, 2, 3, 7, 8, 9, 15, 16, 17, 32, 33, 40])
def test_any_row_count_matches_float32(gemv: NativeGemv, rows: int) -> None:
    torch.manual_seed(rows)
    w = torch.randn(96, 130).bfloat16()  # 3 blocks of 32 outputs; k not a multiple of 32
    x = torch.randn(rows, 130).bfloat16()
    _close(gemv(x, gemv.pack(w), 96), x, w)


def test_a_row_is_the_same_bit_for_bit_whatever_shares_its_call(gemv: NativeGemv) -> None:
    """The decode invariant the engine relies on (``GemvSwitch``): a row's result is the same
    alone, in a decode-sized call (passes of up to 16 rows), and in a prompt-sized one (passes
    of 8), for every pass size and remainder."""
    torch.manual_seed(5)
    w = torch.randn(3072, 576).bfloat16()
    x = torch.randn(300, 576).bfloat16()
    panels = gemv.pack(w)
    alone = torch.cat([gemv(x[i : i + 1], panels, 3072) for i in range(300)])
    for rows in (2, 8, 9, 12, 15, 16, 17, 24, 31, 32, 33, 40, 64, 300):
        assert torch.equal(gemv(x[:rows], panels, 3072), alone[:rows]), rows
    _close(alone, x, w)


def test_rows_with_a_stride_and_a_model_shape(gemv: NativeGemv) -> None:
    torch.manual_seed(0)
    w = torch.randn(3072, 576).bfloat16()
    wide = torch.randn(5, 1000).bfloat16()
    x = wide[:, 100:676]  # rows 1,000 apart: read in place
    _close(gemv(x, gemv.pack(w), 3072), x, w)


def test_shapes_it_does_not_take_are_refused(gemv: NativeGemv) -> None:
    assert not gemv.fits(torch.zeros(48, 64, dtype=torch.bfloat16))  # 48 outputs
    assert not gemv.fits(torch.zeros(64, 63, dtype=torch.bfloat16))  # odd k
    assert not gemv.fits(torch.zeros(64, 64))  # float32
    with pytest.raises(ValueError, match="gemv"):
        gemv.pack(torch.zeros(48, 64, dtype=torch.bfloat16))
    panels = gemv.pack(torch.zeros(64, 64, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="gemv"):
        gemv(torch.zeros(2, 32, dtype=torch.bfloat16), panels, 64)  # k does not match
    with pytest.raises(ValueError, match="gemv"):
        gemv(torch.zeros(2, 64), panels, 64)  # float32 rows


def _count_gemv_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The row counts of every GEMV call from now on (the real kernel still runs)."""
    calls: list[int] = []
    real = NativeGemv.__call__

    def counted(self: NativeGemv, x: torch.Tensor, panels: torch.Tensor, n: int) -> torch.Tensor:
        calls.append(x.shape[0])
        return real(self, x, panels, n)

    monkeypatch.setattr(NativeGemv, "__call__", counted)
    return calls


@pytest.mark.skipif(not packing_available(torch.bfloat16), reason="no prepacked linears here")
def test_make_linear_runs_steps_of_every_size_natively_while_switched_on(
    gemv: NativeGemv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``calibrate.gemv_wins`` sets a runner's shared ``GemvSwitch`` after its linears are
    built: on, every step runs on the GEMV, prompt-sized ones too; off, none does."""
    torch.manual_seed(1)
    w, bias = torch.randn(64, 96).bfloat16(), torch.randn(64).bfloat16()
    calls = _count_gemv_calls(monkeypatch)
    switch = GemvSwitch()
    linear = make_linear(w, bias, True, gemv, switch)
    sizes = (1, 32, 33, 300)
    for on in (True, False):
        switch.on = on
        for rows in sizes:
            x = torch.randn(rows, 96).bfloat16()
            got = linear(x).float()
            want = F.linear(x.float(), w.float(), bias.float())
            assert (got - want).abs().max() <= 0.02 * want.abs().max(), rows
    assert calls == list(sizes)  # every size while on, none once off
    # a weight the kernel does not take stays on oneDNN for every step
    switch.on = True
    odd = make_linear(torch.randn(48, 96).bfloat16(), None, True, gemv, switch)
    assert odd(torch.randn(2, 96).bfloat16()).shape == (2, 48) and calls == list(sizes)


@pytest.mark.skipif(not packing_available(torch.bfloat16), reason="no prepacked linears here")
def test_onednn_copy_is_dropped_only_while_the_gemv_runs(gemv: NativeGemv) -> None:
    """Once the engine settles on the GEMV it frees oneDNN's copy of each weight: the linear
    still computes the same, and can no longer be switched back."""
    from engine.embedded.linear import GemvLinear

    torch.manual_seed(4)
    w = torch.randn(64, 96).bfloat16()
    x = torch.randn(5, 96).bfloat16()
    switch = GemvSwitch(on=False)
    linear = make_linear(w, None, True, gemv, switch)
    assert isinstance(linear, GemvLinear)
    with pytest.raises(RuntimeError, match="in use"):
        linear.drop_fallback()  # oneDNN's copy is what runs now
    switch.on = True
    before = linear(x)
    linear.drop_fallback()
    assert linear.packed is None
    assert torch.equal(linear(x), before)
    assert linear(x[:0]).shape == (0, 64)
    switch.on = False
    with pytest.raises(RuntimeError, match="freed"):
        linear(x)
