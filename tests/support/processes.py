"""The process handling of the real test servers (slapd.py, oidc_provider.py).

* ``free_port()`` and ``port_accepts()``: loopback ports to listen on, and whether one answers
* ``scratch_folder()``: a temporary folder for one server, removed afterwards
* ``ServerProcess``: one server's process: ``start`` runs it with its output in a log file and
  returns once ``ready()`` says so (or raises with the log's tail), ``stop`` ends it (a paused
  one too) and removes its pidfile; the child dies with the test process (PR_SET_PDEATHSIG)
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on at the moment."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_accepts(host: str, port: int, timeout: float = 0.2) -> bool:
    """Whether a TCP connection to ``host:port`` is accepted within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def die_with_parent() -> None:
    """A ``preexec_fn``: the child gets SIGTERM when the test process dies."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@contextmanager
def scratch_folder(prefix: str) -> Iterator[Path]:
    """A fresh temporary folder named ``<prefix>...``, removed with all in it afterwards."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class ServerProcess:
    """One process of a test server, named ``name`` in its errors.

    stderr (and stdout, unless ``start`` is given another file) is appended to ``log_file``;
    ``log_tail()`` returns its last ``tail`` characters. ``pid_file``, where the server writes
    one, is removed by ``stop``.
    """

    def __init__(
        self, name: str, log_file: Path, *, pid_file: Path | None = None, tail: int = 2000
    ) -> None:
        self.name = name
        self.log_file = log_file
        self.pid_file = pid_file
        self.tail = tail
        self._proc: subprocess.Popen | None = None

    def start(
        self,
        cmd: Sequence[str],
        *,
        ready: Callable[[], bool],
        cwd: Path,
        timeout: float,
        env: Mapping[str, str] | None = None,
        stdout: Path | None = None,
        stdin: int = subprocess.DEVNULL,
    ) -> None:
        """Run ``cmd`` (unless it runs already) and poll ``ready()`` until it is true. Raises
        RuntimeError, with the log's tail, when the process exits first or ``timeout`` seconds
        pass (the process is stopped then)."""
        if self.running:
            return
        with ExitStack() as files:
            err = files.enter_context(self.log_file.open("ab"))
            out = files.enter_context(stdout.open("ab")) if stdout is not None else err
            self._proc = subprocess.Popen(
                list(cmd),
                stdin=stdin,
                stdout=out,
                stderr=err,
                cwd=cwd,
                env=env,
                preexec_fn=die_with_parent,
            )
        deadline = time.monotonic() + timeout
        while not ready():
            if self._proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self._proc.returncode}: {self.log_tail()}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} did not start in {timeout} s: {self.log_tail()}")
            time.sleep(0.02)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGCONT (a paused process cannot stop), SIGTERM, then SIGKILL after ``timeout``
        seconds; closes its stdin and removes the pidfile. Nothing happens when not started."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            with suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if proc.stdin:
            proc.stdin.close()
        if self.pid_file is not None:
            self.pid_file.unlink(missing_ok=True)

    def pause(self) -> None:
        """SIGSTOP: its ports still accept TCP connections, but nothing answers."""
        assert self._proc is not None, f"{self.name} is not running"
        os.kill(self._proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after ``pause``."""
        assert self._proc is not None, f"{self.name} is not running"
        os.kill(self._proc.pid, signal.SIGCONT)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.running else None

    def log_tail(self, n: int | None = None) -> str:
        """The last ``n`` (default: ``tail``) characters of the log; "" when there is none."""
        try:
            return self.log_file.read_text(errors="replace")[-(self.tail if n is None else n) :]
        except OSError:
            return ""
