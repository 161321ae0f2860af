"""One-off heavy work on a thread of its own, so that OpenMP's workers stay hot.

libgomp keeps a team of worker threads for every application thread that has run a parallel
region, and once the process holds more OpenMP threads than CPUs it stops letting idle
workers spin: they sleep after ~1,000 spins, and every parallel region then pays a futex
wake-up. Loading a model on the main thread leaves such a team behind, and the scheduler
thread (the only one computing afterwards) runs throttled: a single-row decode step measured
27 ms instead of 19.6 ms on this project's 2-core VM. Work done on a short-lived thread takes
its team with it when the thread ends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def run_in_own_thread(fn: Callable[[], T], name: str = "engine-load") -> T:
    """Run ``fn`` on a new thread and wait; return its result or raise its exception."""
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(fn())
        except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
            error.append(exc)

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]
