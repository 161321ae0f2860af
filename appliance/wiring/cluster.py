"""Running a ``ClusterPlan``: the workers, then the gateway, each in its own process group,
with their logs under ``<data_dir>/logs``; ready once the gateway lists every worker healthy.

The first worker starts alone (a first start converts the bundled model and builds the native
kernels into the shared data directory), the others after it together. What runs is written to
``<data_dir>/cluster.json``, so ``appliance cluster down`` in another shell, or after the
process that started it was killed, stops exactly those processes (a pid is only signalled
while its command line is still ours).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from appliance.wiring.cluster_plan import ClusterPlan
from engine.sglang.gateway_status import read_gateway

log = logging.getLogger(__name__)

STATE_FILE = "cluster.json"
# what a pid's command line must hold to be signalled: a worker, the gateway (smg renames its
# process "smg::router"), or the ``appliance cluster up`` that supervises them
OURS = ("engine-server", "smg", "cluster up")
RESTART_BACKOFF_S = 2.0


class ClusterError(RuntimeError):
    """A process did not start or become healthy in time (the message says which, and where
    its log is)."""


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen
    log: Path


class LocalCluster:
    """Starts and stops one plan's processes. ``start`` stops whatever it started when it fails."""

    def __init__(self, plan: ClusterPlan, data_dir: Path) -> None:
        self.plan = plan
        self.data_dir = data_dir
        self.logs = data_dir / "logs"
        self._procs: list[_Process] = []

    @property
    def gateway_url(self) -> str:
        return self.plan.gateway.base_url

    def start(self, timeout_s: float = 300.0) -> None:
        deadline = time.monotonic() + timeout_s
        self.logs.mkdir(parents=True, exist_ok=True)
        try:
            workers = list(self.plan.workers)
            for batch in (workers[:1], workers[1:]):
                started = [self._spawn(w.name, w.argv, w.env) for w in batch]
                for proc, worker in zip(started, batch, strict=True):
                    self._wait_worker(proc, worker.url, deadline)
            gateway = self._spawn("gateway", self.plan.gateway.argv(), {})
            self._wait_gateway(gateway, deadline)
        except BaseException:
            self.stop()
            raise

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop every process this cluster started (gateway first), then forget the state."""
        for proc in reversed(self._procs):
            _signal_group(proc.popen.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for proc in self._procs:
            try:
                proc.popen.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(proc.popen.pid, signal.SIGKILL)
                proc.popen.wait(5)
        self._procs.clear()
        (self.data_dir / STATE_FILE).unlink(missing_ok=True)

    def pids(self) -> dict[str, int]:
        return {p.name: p.popen.pid for p in self._procs}

    def watch(self, stop: threading.Event) -> None:
        """Until ``stop`` is set: restart a worker whose process has died (after
        ``RESTART_BACKOFF_S``), as systemd's ``Restart=on-failure`` does for the units; the
        gateway's health checks then take it back. Returns early if the gateway itself died."""
        while not stop.wait(1.0):
            for worker in self.plan.workers:
                proc = next((p for p in self._procs if p.name == worker.name), None)
                if proc is None or proc.popen.poll() is None:
                    continue
                log.warning("%s exited (%s); restarting it", worker.name, proc.popen.returncode)
                if stop.wait(RESTART_BACKOFF_S):
                    return
                try:
                    self.restart_worker(self.plan.workers.index(worker))
                except ClusterError as exc:
                    log.error("restarting %s failed: %s", worker.name, exc)
            gateway = next((p for p in self._procs if p.name == "gateway"), None)
            if gateway is not None and gateway.popen.poll() is not None:
                log.error("the gateway exited (%s); see %s", gateway.popen.returncode, gateway.log)
                return

    def kill_worker(self, index: int) -> None:
        """Kill worker ``index`` at once (SIGKILL), as a crash would."""
        name = self.plan.workers[index].name
        proc = next(p for p in self._procs if p.name == name)
        _signal_group(proc.popen.pid, signal.SIGKILL)
        proc.popen.wait(10)

    def restart_worker(self, index: int, timeout_s: float = 120.0) -> None:
        """Start worker ``index`` again on its port (after ``kill_worker``)."""
        worker = self.plan.workers[index]
        self._procs = [p for p in self._procs if p.name != worker.name]
        proc = self._spawn(worker.name, worker.argv, worker.env)
        self._wait_worker(proc, worker.url, time.monotonic() + timeout_s)

    # ---- internals ----------------------------------------------------------------------

    def _spawn(self, name: str, argv: tuple[str, ...], env: dict[str, str]) -> _Process:
        log = self.logs / f"cluster-{name}.log"
        with log.open("ab") as out:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **env},
                start_new_session=True,  # its own process group: stopped as a whole
            )
        proc = _Process(name, popen, log)
        self._procs.append(proc)
        self._write_state()  # recorded at once: ``cluster down`` finds it whatever happens next
        return proc

    def _wait_worker(self, proc: _Process, url: str, deadline: float) -> None:
        """Until the worker generates (``/health_generate``: a one-token run)."""
        while True:
            self._check_alive(proc)
            try:
                if httpx.get(f"{url}/health_generate", timeout=30).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            self._check_deadline(proc, deadline)
            time.sleep(0.5)

    def _wait_gateway(self, proc: _Process, deadline: float) -> None:
        """Until the gateway lists every worker healthy."""
        expected = len(self.plan.worker_urls)
        while True:
            self._check_alive(proc)
            state = read_gateway(self.gateway_url, self.plan.worker_urls, timeout_s=2.0)
            if state.ready and state.healthy_workers == expected:
                return
            self._check_deadline(proc, deadline)
            time.sleep(0.3)

    @staticmethod
    def _check_alive(proc: _Process) -> None:
        if proc.popen.poll() is not None:
            raise ClusterError(
                f"{proc.name} exited with status {proc.popen.returncode}; see {proc.log}"
            )

    @staticmethod
    def _check_deadline(proc: _Process, deadline: float) -> None:
        if time.monotonic() > deadline:
            raise ClusterError(f"{proc.name} did not become healthy in time; see {proc.log}")

    def _write_state(self) -> None:
        state = {
            "gateway": self.gateway_url,
            "workers": list(self.plan.worker_urls),
            "pids": self.pids(),
            "supervisor": os.getpid(),
        }
        path = self.data_dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2), encoding="utf-8")
        tmp.replace(path)


def running_state(data_dir: Path) -> dict[str, int]:
    """The recorded processes still running (empty: no cluster runs from ``data_dir``)."""
    try:
        state = json.loads((data_dir / STATE_FILE).read_text(encoding="utf-8"))
        pids: dict[str, int] = state["pids"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {name: pid for name, pid in pids.items() if _is_ours(pid)}


def stop_recorded(data_dir: Path, grace_s: float = 10.0) -> list[str]:
    """Stop the processes ``<data_dir>/cluster.json`` names (``appliance cluster down``):
    the ``cluster up`` that started them first (it stops its own processes and the app it
    serves), then whatever is left; returns the names of those that were running."""
    path = data_dir / STATE_FILE
    running = running_state(data_dir)
    supervisor = _supervisor(data_dir)
    if supervisor is not None and supervisor != os.getpid() and _is_ours(supervisor):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(supervisor, signal.SIGTERM)
        deadline = time.monotonic() + grace_s * 2
        while time.monotonic() < deadline and _is_ours(supervisor):
            time.sleep(0.2)
    for pid in running.values():
        _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_is_ours(pid) for pid in running.values()):
        time.sleep(0.2)
    for pid in running.values():
        if _is_ours(pid):
            _signal_group(pid, signal.SIGKILL)
    path.unlink(missing_ok=True)
    return sorted(running)


def _supervisor(data_dir: Path) -> int | None:
    try:
        pid = json.loads((data_dir / STATE_FILE).read_text(encoding="utf-8"))["supervisor"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return pid if isinstance(pid, int) else None


def _is_ours(pid: int) -> bool:
    """Whether ``pid`` is alive and still one of the cluster's processes (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    zombie = stat.rsplit(")", 1)[-1].split()[0] == "Z"
    return not zombie and any(mark in cmdline for mark in OURS)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
