"""``run_in_own_thread``: the engine's one-off heavy work runs on a thread that then ends."""

from __future__ import annotations

import threading

import pytest

from engine.embedded.omp import run_in_own_thread


def test_runs_on_another_thread_and_returns_its_result() -> None:
    caller = threading.current_thread()
    seen = run_in_own_thread(lambda: threading.current_thread())
    assert seen is not caller and seen.name == "engine-load" and not seen.is_alive()


def test_the_workers_exception_reaches_the_caller() -> None:
    def fail() -> None:
        raise FileNotFoundError("no model here")

    with pytest.raises(FileNotFoundError, match="no model here"):
        run_in_own_thread(fail)
