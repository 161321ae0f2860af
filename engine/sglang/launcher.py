"""Thin I/O: start an SGLang server process, wait until it generates, stop it.

Readiness is ``GET /health_generate`` answering 200 (SGLang runs a one-token generation; it
answers 503 while starting). On exit or timeout, ``LaunchFailed`` carries the log tail, and names
the knob to turn when the log shows a CUDA out-of-memory error.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections import deque
from pathlib import Path
from typing import IO

import httpx

from engine.sglang.tuning import LaunchPlan

OOM_MARKERS = ("out of memory", "outofmemoryerror")
OOM_HINT = (
    "CUDA ran out of memory: lower --mem-fraction-static (e.g. by 0.03) or "
    "--chunked-prefill-size (e.g. 8192 -> 4096), and cap --max-running-requests"
)
TAIL_LINES = 40


class LaunchFailed(RuntimeError):
    """The server exited or did not become ready; ``log_tail`` holds its last lines."""

    def __init__(self, message: str, log_tail: str, oom: bool) -> None:
        super().__init__(f"{message}\n--- last lines of the server log ---\n{log_tail}")
        self.log_tail = log_tail
        self.oom = oom


def tail(path: Path, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of a text file ('' if it does not exist)."""
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            return "".join(deque(fh, maxlen=lines))
    except FileNotFoundError:
        return ""


def shows_oom(log_text: str) -> bool:
    """Whether a log mentions a CUDA/torch out-of-memory error."""
    lowered = log_text.lower()
    return any(marker in lowered for marker in OOM_MARKERS)


class SGLangLauncher:
    """Runs ``plan.argv`` as a child process (its own process group) logging to ``log_path``."""

    def __init__(self, plan: LaunchPlan, log_path: Path, env: dict[str, str] | None = None):
        self.plan = plan
        self.log_path = Path(log_path)
        self.env = env
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Spawn the server; stdout and stderr go to the log file."""
        if self.running():
            raise RuntimeError("server already running")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        env = {**os.environ, **(self.env or {})}
        self._proc = subprocess.Popen(
            list(self.plan.argv),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # SGLang forks scheduler/detokenizer: stop them together
        )

    def _failure(self, message: str) -> LaunchFailed:
        log_tail = tail(self.log_path)
        oom = shows_oom(log_tail)
        if oom:
            message = f"{message}. {OOM_HINT}"
        return LaunchFailed(message, log_tail, oom)

    def wait_ready(self, timeout_s: float = 900.0, poll_s: float = 0.5) -> None:
        """Poll ``/health_generate`` until 200; ``LaunchFailed`` on exit or timeout."""
        if self._proc is None:
            raise RuntimeError("start() first")
        url = f"{self.plan.base_url}/health_generate"
        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=httpx.Timeout(5.0, connect=1.0)) as client:
            while True:
                code = self._proc.poll()
                if code is not None:
                    raise self._failure(f"SGLang server exited with code {code} before ready")
                try:
                    if client.get(url).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() >= deadline:
                    raise self._failure(f"SGLang server not ready after {timeout_s:g} s ({url})")
                time.sleep(poll_s)

    def stop(self, grace_s: float = 30.0) -> int | None:
        """SIGTERM the process group, SIGKILL after ``grace_s``; returns the exit code."""
        proc, self._proc = self._proc, None
        code = None
        if proc is not None:
            if proc.poll() is None:
                self._signal(proc, signal.SIGTERM)
                try:
                    proc.wait(timeout=grace_s)
                except subprocess.TimeoutExpired:
                    self._signal(proc, signal.SIGKILL)
                    proc.wait(timeout=10)
            code = proc.returncode
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    @staticmethod
    def _signal(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        try:
            os.killpg(proc.pid, sig)  # the group we created with start_new_session
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
