"""Compiling a native kernel library once per machine with the system C compiler.

A library is cached under ``cache_dir`` by a hash of its sources, headers, compiler and flags,
so later starts only load it; a build writes a temporary file and renames it, so concurrent
starts never load a half-written library.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (empty where /proc/cpuinfo is absent)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def cannot_build(needed: frozenset[str]) -> str | None:
    """Why a library whose instructions need the CPU flags ``needed`` (as /proc/cpuinfo spells
    them) cannot be built and run here: flags missing, or no compiler; None when it can."""
    missing = needed - cpu_flags()
    if missing:
        return f"CPU lacks {', '.join(sorted(missing))}"
    if find_compiler() is None:
        return "no C compiler (cc or gcc) on PATH"
    return None


def find_compiler() -> str | None:
    """``$CC`` (default ``cc``), else ``gcc``, as found on PATH; None where neither is."""
    return shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")


@functools.lru_cache(maxsize=8)
def compiler_accepts(compiler: str, flags: tuple[str, ...]) -> bool:
    """Whether ``compiler`` compiles a trivial C file with ``flags``."""
    try:
        done = subprocess.run(
            [compiler, *flags, "-x", "c", "-c", "-o", os.devnull, "-"],
            input="int probe;\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def compile_library(
    cache_dir: Path,
    stem: str,
    sources: Sequence[Path],
    headers: Sequence[Path],
    flags: Sequence[str],
    compiler: str,
) -> Path:
    """``cache_dir/<stem>-<hash>.so`` built from ``sources`` unless it is there; its path.
    Raises ``RuntimeError`` with the compiler's message when the build fails."""
    text = b"".join(p.read_bytes() for p in (*sources, *headers))
    digest = hashlib.sha256(text + " ".join([compiler, *flags]).encode()).hexdigest()[:16]
    target = cache_dir / f"{stem}-{digest}.so"
    if target.exists():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=cache_dir)
    os.close(fd)
    try:
        done = subprocess.run(
            [compiler, *flags, *map(str, sources), "-o", tmp, "-lm"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"kernel build failed: {done.stderr.strip()[-2000:]}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target
