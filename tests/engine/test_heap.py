"""heap.keep_freed_memory: step-sized buffers freed and allocated again stop faulting pages in.

Each case runs in a fresh interpreter: the settings are process-wide and cannot be undone.
The pattern is a forward step's: a few blocks of several MB live at once, all freed at its end.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="the settings are glibc's (mallopt)"
)

BLOCK = 9 << 20  # about a 1,550-token prefill's gate-up output for the default model
BLOCKS = 3
STEPS = 10

_SCRIPT = f"""
import ctypes, json, resource, sys
from engine.embedded.heap import keep_freed_memory

applied = keep_freed_memory() if sys.argv[1] == "on" else None
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]

def step():
    blocks = [libc.malloc({BLOCK}) for _ in range({BLOCKS})]
    assert all(blocks)
    for b in blocks:
        ctypes.memset(b, 1, {BLOCK})
    for b in blocks:
        libc.free(b)

# one larger block first: glibc's adaptive threshold then keeps the step's blocks on the heap
first = libc.malloc({BLOCK} + (1 << 20))
ctypes.memset(first, 1, {BLOCK})
libc.free(first)
step()  # the first step maps its memory either way
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range({STEPS}):
    step()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({{"applied": applied, "faults": faults}}))
"""

PAGES_PER_STEP = BLOCKS * BLOCK // 4096


def _steps(mode: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, mode], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_freed_step_buffers_are_reused_without_page_faults() -> None:
    on = _steps("on")
    assert on["applied"] is True
    # ten steps fault in far fewer pages than one step holds: the memory stayed mapped
    assert on["faults"] < PAGES_PER_STEP // 10, on


def test_without_the_settings_every_step_faults_its_pages_again() -> None:
    # the baseline that gives the test above its meaning: with glibc's defaults the heap's
    # free top is given back after each step and the next one faults it in again
    off = _steps("off")
    assert off["faults"] > STEPS * PAGES_PER_STEP // 2, off


def test_applying_twice_is_harmless() -> None:
    from engine.embedded.heap import keep_freed_memory

    assert keep_freed_memory() == keep_freed_memory()
