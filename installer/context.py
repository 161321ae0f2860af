"""What every install step sees, and what each one reports."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from installer.detect import Facts
from installer.layout import Layout
from installer.profiles import Options


class InstallError(RuntimeError):
    """A step that cannot go on; the message tells the admin what to do."""


@dataclass(frozen=True)
class StepResult:
    name: str
    changed: bool
    detail: str


@dataclass
class Context:
    layout: Layout
    opts: Options
    profile: str
    facts: Facts
    state: dict
    user: str
    repo: Path | None  # the source checkout, when not installing from a bundle
    bundle_manifest: dict | None = None
    upgrade: bool = False
    python: str = sys.executable  # the interpreter that creates the venv
    notes: list[str] = field(default_factory=list)
    admin_password: str | None = None

    @property
    def bundle(self) -> Path | None:
        return self.opts.bundle


def run(cmd: list[str], what: str, env: dict | None = None, timeout: int = 3600) -> str:
    """Run a command; raise ``InstallError`` naming ``what`` with its output tail on failure."""
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(f"{what}: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stdout[-1500:] + "\n" + done.stderr[-2500:]).strip()
        raise InstallError(f"{what} failed (exit {done.returncode}):\n{tail}")
    return done.stdout
