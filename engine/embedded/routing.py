"""Where the embedded engine's work runs, settled once when it loads, and the words its status
shows for that: the fused runner's linears (the native GEMV for every step, oneDNN, or decode
rows on the AMX tiles: ``calibrate.py`` times them) and where attention runs."""

from __future__ import annotations

import logging

from engine.embedded.attention_routes import (
    NATIVE_PREFILL,
    DecodeKernel,
    PrefillKernel,
    PrefillRoute,
)
from engine.embedded.calibrate import amx_step_wins, gemv_wins, linear_costs
from engine.embedded.draft_budget import StepCosts
from engine.embedded.fused import FusedLlama
from engine.embedded.gemv_f32 import NativeGemvF32
from engine.embedded.heap import release_free_memory
from engine.embedded.native import AmxDecode, NativeKernels

log = logging.getLogger(__name__)


def settle_linears(
    runner: FusedLlama, shapes: tuple, decoder: DecodeKernel | None, calibrate: bool
) -> tuple[str, StepCosts | None]:
    """Set where ``runner``'s linears run (it has a native GEMV): the GEMV for every step where
    it wins (oneDNN's idle copies are freed), else oneDNN, with decode rows on the AMX tiles
    where decode attention runs there too and they win. Returns the words for the choice and
    what a step of each size costs on the linears that run (None without calibration).
    ``shapes`` names the weights' shapes for the per-process timings."""
    words = ""
    if calibrate and gemv_wins(runner.run_linears, runner.gemv_switch, shapes):
        # settled for this process: oneDNN's copies of those weights are idle
        freed = runner.drop_onednn_copies()
        release_free_memory()
        log.info("freed oneDNN's weight copies: %.0f MB", freed / 2**20)
    elif (
        calibrate
        and isinstance(decoder, AmxDecode)
        and runner.amx_step_available()
        and amx_step_wins(runner.run_layer_linears, shapes)
    ):
        runner.decode_on_tiles()
        words += " (decode rows on AMX tiles, decode-only steps in one native call)"
    if runner.gemv_switch.on:
        one_call = ", decode steps in one native call" if runner.native_step else ""
        kind = " (AVX2, bfloat16 weights)" if isinstance(runner.gemv, NativeGemvF32) else ""
        words += f" (native GEMV{kind} for every step{one_call})"
    # what a step of each size costs on the linears that run, as timed for that choice
    return words, linear_costs(shapes) if calibrate else None


def attention_words(
    kernel: NativeKernels | None,
    decoder: DecodeKernel | None,
    route: PrefillRoute,
    prefiller: PrefillKernel | None = None,
) -> str:
    """Where attention runs, in words, e.g. "avx512-bf16 kernels (prefill attention on amx,
    decode attention on amx)" or, in float32, "avx2 prefill and decode attention"."""
    if kernel is None:
        if prefiller is not None and decoder is not None and route == NATIVE_PREFILL:
            return f"{prefiller.name} prefill and {decoder.name} decode attention"
        if prefiller is not None:
            where = f"{prefiller.name} prefill attention ({route.summary()})"
        else:
            where = "PyTorch prefill attention"
        if decoder is None:
            return "PyTorch attention" if prefiller is None else f"{where}, PyTorch decode"
        return f"{where}, {decoder.name} decode attention"
    notes = [route.summary()] if route != NATIVE_PREFILL else []
    if decoder is not None:
        notes.append(f"decode attention on {decoder.name}")
    return f"{kernel.name} kernels" + (f" ({', '.join(notes)})" if notes else "")
