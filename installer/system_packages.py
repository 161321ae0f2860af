"""Debian packages the appliance needs beside its wheels: Tesseract OCR with Korean and English.

Online, the install step runs ``apt-get install``; offline, the bundle carries the packages'
``.deb`` files and those of their dependencies (``apt-get download``, built on a machine of the
target Debian release), and the step installs with ``dpkg -i`` only those not installed yet, so
that nothing already on the box is replaced or downgraded. Packages already installed are left
as they are (the step changes nothing then).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from installer.context import Context, InstallError, StepResult, run

APT_PACKAGES = ("tesseract-ocr", "tesseract-ocr-kor", "tesseract-ocr-eng")
DEBS = "debs"  # the bundle's folder of .deb files
_DEPENDS = [
    "apt-cache",
    "depends",
    "--recurse",
    "--no-recommends",
    "--no-suggests",
    "--no-conflicts",
    "--no-breaks",
    "--no-replaces",
    "--no-enhances",
]


def parse_depends(output: str) -> list[str]:
    """The package names of ``apt-cache depends --recurse`` output (its unindented lines),
    virtual packages (``<name>``) left out, sorted."""
    names = {
        line.strip()
        for line in output.splitlines()
        if line and not line[0].isspace() and not line.startswith("<")
    }
    return sorted(names)


def deb_package(path: Path) -> str:
    """The package a ``.deb`` file holds, by its name (``name_version_arch.deb``)."""
    return path.name.split("_", 1)[0]


def debs_to_install(debs: list[Path], installed: set[str]) -> list[Path]:
    """The bundle's ``.deb`` files whose packages this box does not have yet."""
    return sorted(p for p in debs if deb_package(p) not in installed)


def installed_packages(names: list[str] | tuple[str, ...]) -> set[str]:
    """Which of ``names`` dpkg says are installed."""
    if not names or shutil.which("dpkg-query") is None:
        return set()
    done = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\n", *names],
        capture_output=True,
        text=True,
        check=False,
    )
    return {
        parts[0]
        for line in done.stdout.splitlines()
        if len(parts := line.split()) == 2 and parts[1] == "installed"
    }


def download_debs(out: Path, packages: tuple[str, ...] = APT_PACKAGES) -> list[str]:
    """Download ``packages`` and their whole dependency tree as ``.deb`` files into ``out``
    (on a connected Debian machine of the target release); the names downloaded."""
    if shutil.which("apt-get") is None or shutil.which("apt-cache") is None:
        raise InstallError(
            "the bundle carries Debian packages (Tesseract OCR): build it on a Debian machine "
            "of the appliance's release"
        )
    listed = run([*_DEPENDS, *packages], "listing the OCR packages' dependencies")
    names = parse_depends(listed)
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["apt-get", "download", *names], cwd=out, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise InstallError(f"apt-get download failed: {done.stderr.strip()[-1500:]}")
    return names


def debian_release() -> str:
    """This machine's Debian codename (``bookworm``), or '' when it is not said."""
    try:
        text = Path("/etc/os-release").read_text(encoding="utf-8")
    except OSError:
        return ""
    for line in text.splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return ""


def step_system_packages(ctx: Context) -> StepResult:
    """Install Tesseract (kor, eng) from the bundle's ``.deb`` files or with apt-get."""
    missing = [p for p in APT_PACKAGES if p not in installed_packages(APT_PACKAGES)]
    if not missing:
        return StepResult("ocr", False, f"{', '.join(APT_PACKAGES)} installed")
    how = f"apt-get install {' '.join(missing)}"
    if os.geteuid() != 0 or shutil.which("dpkg") is None:
        ctx.notes.append(f"OCR of images and scans needs Tesseract: as root, {how}")
        return StepResult("ocr", False, f"not installed ({how} as root)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if ctx.bundle is not None:
        debs = sorted((ctx.bundle / DEBS).glob("*.deb"))
        if not debs:
            raise InstallError(f"the bundle has no {DEBS}/ folder: rebuild it (bundle build)")
        names = [deb_package(p) for p in debs]
        todo = debs_to_install(debs, installed_packages(names))
        if not todo:
            raise InstallError(f"the bundle's {DEBS}/ lacks {', '.join(missing)}: rebuild it")
        run(["dpkg", "-i", *map(str, todo)], "installing Tesseract from the bundle", env=env)
        return StepResult("ocr", True, f"{len(todo)} packages from the bundle ({DEBS}/)")
    run(["apt-get", "update", "-qq"], "apt-get update", env=env)
    run(["apt-get", "install", "-y", "-qq", *missing], how, env=env)
    return StepResult("ocr", True, f"apt-get installed {', '.join(missing)}")
