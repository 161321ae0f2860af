"""A server process the engine benchmark starts, times and stops: our ``appliance
engine-server`` or a peer engine (vLLM CPU). Start-up is measured from process start to the
first healthy answer; memory is the peak resident set of the whole process tree, sampled."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx


def tree_rss_bytes(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants (Linux /proc)."""
    total, stack, seen = 0, [pid], set()
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            status = Path(f"/proc/{p}/status").read_text()
            for line in status.splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
            for task in Path(f"/proc/{p}/task").iterdir():
                children = (task / "children").read_text().split()
                stack.extend(int(c) for c in children)
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return total


class ManagedServer:
    """Starts ``command`` in its own process group; ``stop()`` ends the whole group."""

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        health_url: str,
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
    ) -> None:
        self.name = name
        self.command = list(command)
        self.health_url = health_url
        self.env = {**os.environ, **(env or {})}
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self.startup_s = 0.0
        self.peak_rss = 0
        self._sampling = threading.Event()
        self._sampler: threading.Thread | None = None

    def start(self, timeout_s: float) -> float:
        """Start the server and wait until it answers ``health_url``; return start-up seconds."""
        log = open(self.log_path, "wb") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        began = time.perf_counter()
        self.proc = subprocess.Popen(
            self.command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self._sampling.set()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        while time.perf_counter() - began < timeout_s:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with code {self.proc.returncode} while starting"
                    + (f"; see {self.log_path}" if self.log_path else "")
                )
            try:
                if httpx.get(self.health_url, timeout=2.0).status_code == 200:
                    self.startup_s = time.perf_counter() - began
                    return self.startup_s
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"{self.name} was not healthy after {timeout_s:.0f} s")

    def _sample(self) -> None:
        while self._sampling.is_set() and self.proc is not None and self.proc.poll() is None:
            self.peak_rss = max(self.peak_rss, tree_rss_bytes(self.proc.pid))
            time.sleep(0.25)

    def stop(self) -> None:
        self._sampling.clear()
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
