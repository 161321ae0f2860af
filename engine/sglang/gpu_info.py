"""GPU facts: parse ``nvidia-smi`` CSV output and match cards to known profiles.

The query the appliance runs is::

    nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version \
        --format=csv,noheader,nounits

which prints one line per GPU, memory in MiB, e.g. ``NVIDIA H100 80GB HBM3, 81559, 1, 550.54.15``.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

MIB = 1 << 20
GIB = 1 << 30

NVIDIA_SMI_QUERY = (
    "nvidia-smi",
    "--query-gpu=name,memory.total,memory.used,driver_version",
    "--format=csv,noheader,nounits",
)


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as ``nvidia-smi`` reports it (memory in MiB)."""

    index: int
    name: str
    memory_total_mib: int
    memory_used_mib: int
    driver_version: str

    @property
    def memory_total_bytes(self) -> int:
        return self.memory_total_mib * MIB


@dataclass(frozen=True)
class GpuProfile:
    """Defaults for a known card class.

    ``fraction_band`` clamps ``--mem-fraction-static``; ``chunked_prefill`` is the default
    ``--chunked-prefill-size``; ``headroom_gib`` is the free memory kept at start-up for long
    multi-turn contexts (SGLang's ``available_gpu_mem``).
    """

    key: str
    label: str
    match: tuple[str, ...]  # all substrings must occur in the upper-cased nvidia-smi name
    nominal_gib: int
    fraction_band: tuple[float, float]
    chunked_prefill: int
    headroom_gib: float


PROFILES: tuple[GpuProfile, ...] = (
    GpuProfile("h200", "H200 141GB", ("H200",), 141, (0.88, 0.90), 8192, 8.0),
    GpuProfile("h100", "H100 80GB", ("H100",), 80, (0.85, 0.88), 8192, 6.0),
    GpuProfile("a100-80g", "A100 80GB", ("A100", "80GB"), 80, (0.85, 0.88), 8192, 6.0),
    GpuProfile("l40s", "L40S 48GB", ("L40S",), 48, (0.78, 0.85), 4096, 5.0),
)

GENERIC_PROFILE = GpuProfile("generic", "unknown GPU", (), 0, (0.70, 0.88), 4096, 6.0)


def match_profile(name: str) -> GpuProfile:
    """The known profile for an ``nvidia-smi`` name, or the conservative generic one."""
    upper = name.upper()
    for profile in PROFILES:
        if all(part in upper for part in profile.match):
            return profile
    return GENERIC_PROFILE


def parse_nvidia_smi(text: str) -> list[GpuInfo]:
    """Parse ``--format=csv,noheader,nounits`` output; blank lines are skipped.

    Raises ``ValueError`` on a line that does not have the four expected fields.
    """
    gpus: list[GpuInfo] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 4:
            raise ValueError(f"nvidia-smi line {lineno}: expected 4 fields, got {raw!r}")
        name, total, used, driver = fields
        try:
            total_mib, used_mib = int(float(total)), int(float(used))
        except ValueError as exc:
            raise ValueError(f"nvidia-smi line {lineno}: bad memory value in {raw!r}") from exc
        gpus.append(GpuInfo(len(gpus), name, total_mib, used_mib, driver))
    return gpus


def read_gpus(timeout_s: float = 20.0) -> list[GpuInfo]:
    """Run ``nvidia-smi`` and parse it; ``[]`` when it is absent or fails (no GPU here)."""
    if shutil.which(NVIDIA_SMI_QUERY[0]) is None:
        return []
    try:
        done = subprocess.run(
            NVIDIA_SMI_QUERY, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:
        return []
    return parse_nvidia_smi(done.stdout)
