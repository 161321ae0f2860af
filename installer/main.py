"""``install.sh``: the one-command installer, and ``install.sh bundle build|verify``.

install.sh [--prefix DIR] [--bundle DIR] [--profile P] [--model-dir DIR] [--workers URLS]
           [--no-systemd] [--no-start] [--upgrade | --uninstall [--purge]]
install.sh bundle build OUT [--profile cpu|gpu] [--model-dir DIR ...]
install.sh bundle verify DIR
"""

from __future__ import annotations

import argparse
import getpass
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from engine.sglang.tuning import NCCL_PORT_OFFSET
from installer.bundle import BundleError, build_bundle, verify_bundle
from installer.context import Context, InstallError, StepResult, run
from installer.detect import Facts, can_bind, gather_facts, pick_profile
from installer.layout import SYSTEM_PREFIX, Layout
from installer.preflight import preflight
from installer.profiles import GATEWAY_PORT, Options, extra_for
from installer.state import load_state, save_state
from installer.steps_index import step_index
from installer.steps_install import step_models, step_packages, step_venv
from installer.steps_system import (
    SERVICE_USER,
    app_url,
    step_admin,
    step_config,
    step_service_user,
    step_start,
    step_units,
    uninstall,
)
from installer.system_packages import step_system_packages

REPO = Path(__file__).resolve().parent.parent


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="install.sh", description="Install the RAG appliance.")
    p.add_argument("--prefix", type=Path, default=SYSTEM_PREFIX)
    p.add_argument("--bundle", type=Path, help="an offline bundle directory (no network used)")
    p.add_argument("--profile", choices=["cpu", "h100", "h200", "multi-node"])
    p.add_argument("--model-dir", type=Path, help="GPU profiles: the served model directory")
    # these default to what the last install used (the state file), else to REMEMBERED_DEFAULTS
    p.add_argument("--workers", help="multi-node: SGLang worker URLs, comma-separated")
    p.add_argument("--host", help="where the web app listens (127.0.0.1)")
    p.add_argument("--port", type=int, help="the web app's port (7860)")
    p.add_argument("--engine-port", type=int, help="the engine's port (30000)")
    p.add_argument("--database-url", help="e.g. postgresql://app@db:5432/appliance")
    p.add_argument(
        "--with-sample-corpus", action="store_const", const=True, help="ingest the sample handbook"
    )
    p.add_argument("--context-length", type=int, help="GPU tuning (32768)")
    p.add_argument("--concurrency", type=int, help="GPU tuning: concurrent sessions (32)")
    p.add_argument(
        "--speculative",
        choices=["off", "ngram"],
        help="GPU tuning: NGRAM speculative decoding (off until measured on the GPU)",
    )
    p.add_argument("--no-systemd", action="store_true", help="render units, do not install them")
    p.add_argument("--no-start", action="store_true", help="do not start the services")
    p.add_argument("--upgrade", action="store_true", help="back up, then install the new version")
    p.add_argument("--uninstall", action="store_true", help="remove; keeps config and data")
    p.add_argument("--purge", action="store_true", help="with --uninstall: remove them too")
    p.add_argument(
        "--render-only",
        action="store_true",
        help="detect, preflight, and write the config and units under --prefix; install nothing",
    )
    p.add_argument("--gpus-csv", type=Path, help="a recorded nvidia-smi CSV instead of this box's")
    p.add_argument("--cuda-version", help="with --gpus-csv: the driver's CUDA version")
    return p


def bundle_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="install.sh bundle")
    sub = p.add_subparsers(dest="action", required=True)
    b = sub.add_parser("build", help="build an offline bundle (on a connected machine)")
    b.add_argument("out", type=Path)
    b.add_argument("--profile", choices=["cpu", "gpu"], default="cpu")
    b.add_argument("--model-dir", type=Path, action="append", default=[])
    b.add_argument("--python-version", help="gpu: the target box's Python (default 3.11)")
    v = sub.add_parser("verify", help="check a bundle's checksums")
    v.add_argument("dir", type=Path)
    args = p.parse_args(argv)
    try:
        if args.action == "verify":
            manifest = verify_bundle(args.dir)
            print(f"bundle ok: {manifest['project_wheel']} ({manifest['profile']} profile)")
            return 0
        manifest = build_bundle(
            args.out, REPO, args.profile, tuple(args.model_dir), args.python_version
        )
    except BundleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    n = sum(1 for _ in (args.out / "wheelhouse").glob("*.whl"))
    print(f"bundle written to {args.out}: {n} wheels, models {sorted(manifest['models'])}")
    print(f"copy it to the appliance and run: bash {args.out.name}/install.sh")
    return 0


REMEMBERED_DEFAULTS = {
    "host": "127.0.0.1",
    "port": 7860,
    "engine_port": 30000,
    "database_url": "",
    "workers": "",
    "with_sample_corpus": False,
    "context_length": 32768,
    "concurrency": 32,
    "speculative": "off",
    "model_dir": None,
}


def remembered(args: argparse.Namespace, state: dict) -> dict:
    """Each option as given, else as the last install had it, else its default."""
    saved = state.get("options", {})
    out = {}
    for key, default in REMEMBERED_DEFAULTS.items():
        value = getattr(args, key)
        out[key] = value if value is not None else saved.get(key, default)
    if out["model_dir"] is not None:
        out["model_dir"] = str(out["model_dir"])
    return out


def _options(args: argparse.Namespace, chosen: dict) -> Options:
    workers = tuple(u.strip() for u in chosen["workers"].split(",") if u.strip())
    return Options(
        prefix=args.prefix,
        host=chosen["host"],
        port=chosen["port"],
        engine_port=chosen["engine_port"],
        database_url=chosen["database_url"],
        workers=workers,
        model_dir=Path(chosen["model_dir"]) if chosen["model_dir"] else None,
        bundle=args.bundle.resolve() if args.bundle else None,
        sample_corpus=chosen["with_sample_corpus"],
        context_length=chosen["context_length"],
        concurrency=chosen["concurrency"],
        speculative="" if chosen["speculative"] == "off" else chosen["speculative"],
        systemd=not args.no_systemd,
        start=not args.no_start,
        forced_profile=args.profile,
        gpus_csv=args.gpus_csv,
        cuda_version=args.cuda_version,
    )


def _busy_ports(opts: Options, profile: str, gpu_count: int, reinstall: bool) -> dict[int, str]:
    if reinstall:  # our own services hold them
        return {}
    wanted = {opts.port: "app"}
    if profile == "cpu":
        wanted[opts.engine_port] = "engine"
    # a GPU box runs up to one worker per GPU, on consecutive ports, and then a gateway
    for index in range(gpu_count):
        wanted[opts.engine_port + index] = "engine" if index == 0 else f"engine worker {index}"
        wanted[opts.engine_port + NCCL_PORT_OFFSET + index] = f"engine worker {index} (NCCL)"
    if profile == "multi-node" or gpu_count > 1:
        wanted[GATEWAY_PORT] = "gateway"
    host = opts.host if opts.host not in ("0.0.0.0", "::") else "0.0.0.0"
    return {port: role for port, role in wanted.items() if not can_bind(host, port)}


def _print(result: StepResult) -> None:
    print(f"[{'changed' if result.changed else 'ok'}] {result.name}: {result.detail}", flush=True)


def _uninstall(layout: Layout, state: dict, opts: Options, purge: bool) -> int:
    removed = uninstall(layout, state, opts.systemd, purge)
    print("removed:\n  " + "\n  ".join(removed) if removed else "nothing to remove")
    if not purge:
        print(
            f"kept the config ({layout.etc_dir}) and the data ({layout.data_dir}); "
            "--uninstall --purge removes them"
        )
    return 0


def _profile(facts: Facts, opts: Options, state: dict, manifest: dict | None) -> str:
    """The profile to install (as installed unless ``--profile``), checked against the bundle."""
    try:
        decision = pick_profile(facts, opts.workers, opts.forced_profile or state.get("profile"))
    except ValueError as exc:
        raise InstallError(str(exc)) from exc
    if not opts.forced_profile and state.get("profile"):
        decision = replace(decision, reason="as installed; --profile changes it")
    profile = decision.profile
    print(f"profile: {profile} ({decision.reason})")
    if manifest and manifest["extra"] != extra_for(profile):
        raise InstallError(
            f"the bundle is for the {manifest['extra']} extra, this box needs "
            f"{extra_for(profile)}: build one with --profile {extra_for(profile)}"
        )
    return profile


def _preflight(facts: Facts, profile: str, opts: Options, layout: Layout, state: dict) -> int:
    """Print the preflight findings; returns how many failed."""
    findings = preflight(
        facts,
        profile,
        _busy_ports(opts, profile, len(facts.gpus), bool(state)),
        reinstall=layout.venv.exists(),
    )
    for f in findings:
        print(f"[{'ok' if f.ok else 'FAIL'}] preflight {f.name}: {f.detail}")
    return sum(not f.ok for f in findings)


def _backup(layout: Layout) -> None:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    out = layout.backups_dir / f"pre-upgrade-{stamp}.tar.gz"
    run([str(layout.wrapper), "backup", "--out", str(out)], "the pre-upgrade backup")
    print(f"[ok] backup: {out}")


def _install_steps(ctx: Context) -> list[StepResult]:
    """Steps 3-7 in order (OCR's Debian packages, venv, packages, models, user, config, admin,
    index, units), each printed."""
    results = [step_system_packages(ctx), step_venv(ctx), step_packages(ctx)]
    for r in results:
        _print(r)
    models, model_path, embed_path = step_models(ctx)
    _print(models)
    for step in (
        lambda: step_service_user(ctx),  # first: the config's group is the service user
        lambda: step_config(ctx, model_path, embed_path),
        lambda: step_admin(ctx),
        lambda: step_index(ctx),  # after the config (its embedder) and the database
        lambda: step_units(ctx),
    ):
        result = step()
        _print(result)
        results.append(result)
    results.append(models)
    return results


def _save(ctx: Context, chosen: dict) -> None:
    now = datetime.now(UTC).isoformat(timespec="seconds")
    layout = ctx.layout
    ctx.state.update(profile=ctx.profile, prefix=str(layout.prefix), updated_at=now, options=chosen)
    ctx.state.setdefault("installed_at", now)
    save_state(layout.state_file, ctx.state)


def install(args: argparse.Namespace) -> int:
    """Install, re-run or upgrade as ``args`` say (or uninstall, or render only); the exit code."""
    layout = Layout.for_prefix(args.prefix)
    state = load_state(layout.state_file)
    chosen = remembered(args, state)
    opts = _options(args, chosen)
    if args.uninstall:
        return _uninstall(layout, state, opts, args.purge)
    if args.upgrade and not state:
        raise InstallError(f"nothing is installed under {layout.prefix}: run without --upgrade")
    manifest = verify_bundle(opts.bundle) if opts.bundle else None
    facts = gather_facts(layout.prefix, opts.gpus_csv, opts.cuda_version)
    profile = _profile(facts, opts, state, manifest)
    failed = _preflight(facts, profile, opts, layout, state)
    if args.render_only:
        return _render_only(layout, opts, profile, facts, failed)
    if failed:
        print("preflight failed: fix the FAIL lines above and rerun", file=sys.stderr)
        return 2
    user = SERVICE_USER if layout.is_system else getpass.getuser()
    ctx = Context(
        layout,
        opts,
        profile,
        facts,
        dict(state),
        user,
        repo=None if opts.bundle else REPO,
        bundle_manifest=manifest,
        upgrade=args.upgrade,
    )
    if args.upgrade and layout.appliance_bin.exists():
        _backup(layout)
    results = _install_steps(ctx)
    _save(ctx, chosen)
    started = step_start(ctx, restart=any(r.changed for r in results) and bool(state))
    _print(started)
    changed = [r.name for r in results if r.changed]
    print("changed: " + (", ".join(changed) if changed else "nothing (already installed)"))
    for note in ctx.notes:
        print(f"note: {note}")
    _summary(ctx)
    return 0


def _render_only(layout: Layout, opts: Options, profile: str, facts: Facts, failed: int) -> int:
    """Write the config and the units a real install would write; nothing else."""
    opts = replace(opts, systemd=False, start=False)
    ctx = Context(layout, opts, profile, facts, {}, getpass.getuser(), repo=None)
    model = str(opts.model_dir or layout.models_dir / "smollm2-135m-instruct")
    for result in (step_config(ctx, model, ""), step_units(ctx)):
        _print(result)
    for note in ctx.notes:
        print(f"note: {note}")
    if failed:
        print(f"render only: {failed} preflight failure(s) above would stop a real install")
    return 0


def _summary(ctx: Context) -> None:
    print(f"\nThe appliance: {app_url(ctx)}")
    if ctx.admin_password:
        print(f"First admin: {ctx.opts.admin_username} / {ctx.admin_password}")
        print("(shown once: change it after logging in)")
    print(f"Commands: {ctx.layout.wrapper} doctor | backup | restore | users ...")
    if not ctx.opts.systemd:
        print(f"Units rendered in {ctx.layout.units_dir} (not installed: --no-systemd)")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bundle"]:
        return bundle_main(argv[1:])
    args = build_parser().parse_args(argv)
    if args.purge and not args.uninstall:
        print("--purge goes with --uninstall", file=sys.stderr)
        return 2
    try:
        return install(args)
    except (InstallError, BundleError) as exc:
        print(f"install failed: {exc}", file=sys.stderr)
        return 1
