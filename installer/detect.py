"""Hardware facts and the profile they pick.

``gather_facts`` is the only impure part (``/proc``, ``nvidia-smi``, ``statvfs``); ``pick_profile``
is a pure function of the facts, so recorded ``nvidia-smi`` outputs test it.
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from engine.sglang.gpu_info import GpuInfo, match_profile, parse_nvidia_smi, read_gpus

PROFILES = ("cpu", "h100", "h200", "multi-node")


@dataclass(frozen=True)
class Facts:
    """What preflight and detection need to know about this box."""

    system: str
    os_name: str
    python: tuple[int, int, int]
    ram_gb: float
    disk_free_gb: float
    gpus: tuple[GpuInfo, ...] = ()
    cuda_version: str | None = None
    cpu_flags: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class Decision:
    profile: str
    reason: str


def _os_name() -> str:
    try:
        text = Path("/etc/os-release").read_text(encoding="utf-8")
    except OSError:
        return platform.platform()
    match = re.search(r'^PRETTY_NAME="?([^"\n]+)"?', text, re.MULTILINE)
    return match.group(1) if match else platform.platform()


def _ram_gb() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024 / 1e9
    except OSError:
        pass
    return 0.0


def disk_free_gb(path: Path) -> float:
    """Free space at ``path`` or its nearest existing parent."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free / 1e9


def cuda_version_from_smi(text: str) -> str | None:
    """The ``CUDA Version: 12.4`` the driver reports in ``nvidia-smi``'s header."""
    match = re.search(r"CUDA Version:\s*([0-9]+\.[0-9]+)", text)
    return match.group(1) if match else None


def _cuda_version() -> str | None:
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        done = subprocess.run(
            ["nvidia-smi"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return cuda_version_from_smi(done.stdout)


def _cpu_flags() -> frozenset[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def gather_facts(
    prefix: Path, gpus_csv: Path | None = None, cuda_version: str | None = None
) -> Facts:
    """Read this box. ``gpus_csv`` (a recorded ``nvidia-smi`` CSV) replaces the real GPUs."""
    if gpus_csv is not None:
        gpus = tuple(parse_nvidia_smi(gpus_csv.read_text(encoding="utf-8")))
        cuda = cuda_version
    else:
        gpus = tuple(read_gpus())
        cuda = cuda_version or (_cuda_version() if gpus else None)
    return Facts(
        system=platform.system(),
        os_name=_os_name(),
        python=tuple(sys.version_info[:3]),
        ram_gb=_ram_gb(),
        disk_free_gb=disk_free_gb(prefix),
        gpus=gpus,
        cuda_version=cuda,
        cpu_flags=_cpu_flags(),
    )


def pick_profile(
    facts: Facts, workers: tuple[str, ...] = (), forced: str | None = None
) -> Decision:
    """cpu without a GPU; h200 on H200 cards; h100 on every other NVIDIA card (tuned for the
    card it is: A100, L40S, ...); multi-node when SGLang worker URLs are given."""
    if forced is not None:
        if forced not in PROFILES:
            raise ValueError(f"unknown profile {forced!r}; choose one of {', '.join(PROFILES)}")
        if forced in ("h100", "h200") and not facts.gpus:
            raise ValueError(f"profile {forced} needs an NVIDIA GPU, and nvidia-smi shows none")
        if forced == "multi-node" and not workers:
            raise ValueError("profile multi-node needs the worker URLs (--workers URL,URL)")
        return Decision(forced, "chosen with --profile")
    if workers:
        return Decision("multi-node", f"{len(workers)} SGLang worker(s) given with --workers")
    if not facts.gpus:
        return Decision("cpu", "no NVIDIA GPU found: the embedded CPU engine")
    card = match_profile(facts.gpus[0].name)
    n = len(facts.gpus)
    desc = f"{n}x {facts.gpus[0].name}"
    if card.key == "h200":
        return Decision("h200", f"{desc}: SGLang on this box")
    tuned = "" if card.key == "h100" else f" (launch tuned for {card.label})"
    return Decision("h100", f"{desc}: SGLang on this box{tuned}")


def can_bind(host: str, port: int) -> bool:
    """Whether ``host:port`` is free to listen on."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True
