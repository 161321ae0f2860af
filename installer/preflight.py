"""Preflight: pure checks over ``Facts`` that say what is wrong and what to do about it."""

from __future__ import annotations

from dataclasses import dataclass

from installer.detect import Facts

MIN_PYTHON = (3, 11)
MIN_DRIVER = 535  # the production branch with H100/H200 support and CUDA 12.x compatibility
MIN_CUDA = (12, 1)
# (free disk GB for venv + models + data, RAM GB) per profile
NEEDS = {"cpu": (6.0, 4.0), "h100": (60.0, 32.0), "h200": (60.0, 32.0), "multi-node": (20.0, 8.0)}


@dataclass(frozen=True)
class Finding:
    name: str
    ok: bool
    detail: str


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def preflight(
    facts: Facts,
    profile: str,
    busy_ports: dict[int, str],
    reinstall: bool = False,
) -> list[Finding]:
    """Every check, in order. ``busy_ports`` maps ports that cannot be bound to their role;
    ``reinstall``: the venv already exists, so less free disk is needed."""
    out = [
        Finding(
            "os",
            facts.system == "Linux",
            facts.os_name if facts.system == "Linux" else f"{facts.system}: Linux is required",
        ),
        Finding(
            "python",
            facts.python[:2] >= MIN_PYTHON,
            ".".join(map(str, facts.python))
            + (
                ""
                if facts.python[:2] >= MIN_PYTHON
                else ": install Python >= 3.11 "
                "(e.g. apt-get install python3.11 python3.11-venv) and rerun"
            ),
        ),
    ]
    disk_need, ram_need = NEEDS[profile]
    disk_need = 1.0 if reinstall else disk_need
    out.append(
        Finding(
            "disk",
            facts.disk_free_gb >= disk_need,
            f"{facts.disk_free_gb:.1f} GB free"
            + (
                ""
                if facts.disk_free_gb >= disk_need
                else f": free at least {disk_need:g} GB "
                "under the prefix, or pass --prefix on a larger disk"
            ),
        )
    )
    out.append(
        Finding(
            "ram",
            facts.ram_gb >= ram_need,
            f"{facts.ram_gb:.1f} GB"
            + ("" if facts.ram_gb >= ram_need else f": profile {profile} needs {ram_need:g} GB"),
        )
    )
    for port, role in sorted(busy_ports.items()):
        out.append(
            Finding(
                "ports",
                False,
                f"{port} ({role}) is in use: stop what listens there (ss -ltnp 'sport = :{port}'),"
                " or choose another with --port / --engine-port",
            )
        )
    if not busy_ports:
        out.append(Finding("ports", True, "free"))
    if profile in ("h100", "h200") or (profile == "multi-node" and facts.gpus):
        out += _gpu_findings(facts)
    return out


def _gpu_findings(facts: Facts) -> list[Finding]:
    if not facts.gpus:
        return [Finding("nvidia", False, "nvidia-smi shows no GPU: install the NVIDIA driver")]
    drivers = {g.driver_version for g in facts.gpus}
    driver = min(drivers, key=_version)
    major = _version(driver)[0] if _version(driver) else 0
    out = [
        Finding(
            "nvidia driver",
            major >= MIN_DRIVER,
            f"{driver} on {len(facts.gpus)} GPU(s)"
            + ("" if major >= MIN_DRIVER else f": install driver >= {MIN_DRIVER} and reboot"),
        )
    ]
    if facts.cuda_version is None:
        out.append(Finding("cuda", False, "nvidia-smi reports no CUDA version: repair the driver"))
    else:
        ok = _version(facts.cuda_version)[:2] >= MIN_CUDA
        need = ".".join(map(str, MIN_CUDA))
        out.append(
            Finding(
                "cuda",
                ok,
                f"driver supports CUDA {facts.cuda_version}"
                + ("" if ok else f": SGLang needs CUDA >= {need}; upgrade the driver"),
            )
        )
    return out
