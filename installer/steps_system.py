"""Install steps 5-9: config, data dir, first admin, systemd units, start and smoke test; and
the uninstall. Each step changes nothing that is already right."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

from installer.context import Context, InstallError, StepResult, run
from installer.layout import UNIT_NAMES, Layout, start_order, unit_name
from installer.profiles import render_config
from installer.state import ensure_file, sha256_text
from installer.units import box_plan, gateway_workers, render_units

SERVICE_USER = "appliance"


def _metrics_token(path: Path) -> str:
    """The config's ``security.metrics_token`` when it has one (a re-install keeps what
    Prometheus was given), else a new one."""
    try:
        current = tomllib.loads(path.read_text(encoding="utf-8"))
        token = current.get("security", {}).get("metrics_token", "")
    except (OSError, tomllib.TOMLDecodeError, AttributeError):
        token = ""
    return token if isinstance(token, str) and len(token) >= 16 else secrets.token_urlsafe(32)


def box_names() -> tuple[str, ...]:
    """The names this box answers to on the network (host name and FQDN), for
    ``security.allowed_hosts``; IP addresses and ``localhost`` are always allowed."""
    names = {socket.gethostname().strip().lower(), socket.getfqdn().strip().lower()}
    return tuple(sorted(n for n in names if n and n != "localhost" and n[-1:] != "."))


def step_config(ctx: Context, model_path: str, embed_path: str) -> StepResult:
    """Write the config; a file the admin edited is kept as it is."""
    path = ctx.layout.config_file
    token = _metrics_token(path)
    plan = box_plan(ctx.profile, ctx.opts, ctx.layout, ctx.facts.gpus, ctx.facts.ram_gb)
    routed = gateway_workers(ctx.profile, ctx.opts, plan)
    text = render_config(
        ctx.profile, ctx.layout, ctx.opts, model_path, embed_path, token, routed, box_names()
    )
    if path.is_file():
        current = path.read_text(encoding="utf-8")
        written = ctx.state.get("config_sha")
        if current != text and written and sha256_text(current) != written:
            ctx.notes.append(
                f"{path} was edited by hand and is kept; the installer's version "
                "would differ (see README, Configuration)"
            )
            return StepResult("config", False, f"{path} (edited by the admin: kept)")
    changed = ensure_file(path, text, 0o640)
    ctx.state["config_sha"] = sha256_text(text)
    if ctx.layout.is_system:
        shutil.chown(path, "root", ctx.user)
    return StepResult("config", changed, str(path))


def step_service_user(ctx: Context) -> StepResult:
    """The ``appliance`` system user owns the data dir (system installs only)."""
    ctx.layout.data_dir.mkdir(parents=True, exist_ok=True)
    if not ctx.layout.is_system:
        return StepResult("user", False, f"{ctx.user} (not a system install)")
    changed = False
    try:
        import pwd

        pwd.getpwnam(ctx.user)
    except KeyError:
        run(
            [
                "useradd",
                "--system",
                "--home-dir",
                str(ctx.layout.data_dir),
                "--shell",
                "/usr/sbin/nologin",
                ctx.user,
            ],
            "creating the service user",
        )
        changed = True
    for root, dirs, files in os.walk(ctx.layout.data_dir):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            shutil.chown(name, ctx.user, ctx.user)
    return StepResult("user", changed, f"{ctx.user} owns {ctx.layout.data_dir}")


def step_admin(ctx: Context) -> StepResult:
    """Create the first admin (password shown once at the end), unless one exists."""
    out = run(
        [str(ctx.layout.python), "-m", "installer.bootstrap_admin", str(ctx.layout.config_file)],
        "bootstrapping the first admin",
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    result = json.loads(out.strip().splitlines()[-1])
    if ctx.layout.is_system:
        step_service_user(ctx)  # the database file was just created as root
    if result["created"]:
        ctx.admin_password = result["password"]
        return StepResult("admin", True, f"created {result['username']}")
    return StepResult("admin", False, f"{result['username']} exists")


def wrapper_text(layout: Layout) -> str:
    return (
        "#!/bin/sh\n# the appliance command with this install's config (written by install.sh)\n"
        f'exec "{layout.appliance_bin}" --config "{layout.config_file}" "$@"\n'
    )


def step_units(ctx: Context) -> StepResult:
    """Render the units (engine, app, gateway) and the ``appliance`` wrapper."""
    host_ram = ctx.facts.ram_gb
    rendered = render_units(ctx.profile, ctx.layout, ctx.opts, ctx.user, ctx.facts.gpus, host_ram)
    changed = ensure_file(ctx.layout.wrapper, wrapper_text(ctx.layout), 0o755)
    for role, text in rendered.units.items():
        changed |= ensure_file(ctx.layout.unit_path(role), text)
    for role in set(ctx.state.get("units", [])) - set(rendered.units):
        stale = ctx.layout.unit_path(role)  # a unit this installer wrote and no longer needs
        if stale.exists():
            stale.unlink()
            changed = True
    ctx.state["units"] = sorted(rendered.units)
    if rendered.plan is not None:
        ctx.notes += [f"SGLang launch: {command}" for command in rendered.plan.commands()]
        ctx.notes += [f"tuning warning: {w}" for w in rendered.plan.warnings]
    if ctx.opts.systemd:
        if changed:
            run(["systemctl", "daemon-reload"], "systemctl daemon-reload")
        run(["systemctl", "enable", *_names(ctx)], "enabling the units")
        link = Path("/usr/local/bin/appliance")
        if ctx.layout.is_system and not link.exists():
            link.symlink_to(ctx.layout.wrapper)
    names = ", ".join(unit_name(r) for r in start_order(rendered.units))
    return StepResult("units", changed, f"{names} in {ctx.layout.units_dir}")


def _names(ctx: Context) -> list[str]:
    return [unit_name(r) for r in start_order(ctx.state.get("units", []))]


def app_url(ctx: Context) -> str:
    host = ctx.opts.host if ctx.opts.host not in ("0.0.0.0", "::") else "127.0.0.1"
    return f"http://{host}:{ctx.opts.port}"


def wait_healthy(url: str, timeout_s: float) -> bool:
    """Poll ``url``/health until it answers 200 (True) or the time is up (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
                if response.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(2)
    return False


def step_start(ctx: Context, restart: bool) -> StepResult:
    """Start (or, after a change, restart) the services; wait for health; run the doctor."""
    if not ctx.opts.systemd or not ctx.opts.start:
        why = "--no-systemd" if not ctx.opts.systemd else "--no-start"
        return StepResult("start", False, f"skipped ({why})")
    names = _names(ctx)
    run(["systemctl", "restart" if restart else "start", *names], "starting the services")
    if not wait_healthy(app_url(ctx), 900):
        raise InstallError(
            f"the app did not become healthy at {app_url(ctx)}: journalctl -u "
            f"{UNIT_NAMES['app']} -u {UNIT_NAMES['engine']} -n 100"
        )
    done = subprocess.run(
        [str(ctx.layout.wrapper), "doctor"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    print(done.stdout, end="")
    if done.returncode != 0:
        raise InstallError("appliance doctor found problems (above); fix them and rerun")
    return StepResult("start", restart, f"{', '.join(names)} running; doctor ok")


def uninstall(layout: Layout, state: dict, systemd: bool, purge: bool) -> list[str]:
    """Stop and remove the services, the venv and the wrapper; the config and the data stay
    unless ``purge``. Returns what was removed."""
    removed = []
    roles = start_order({*UNIT_NAMES, *state.get("units", [])})
    names = [unit_name(r) for r in roles if r in state.get("units", UNIT_NAMES)]
    if systemd and shutil.which("systemctl"):
        subprocess.run(["systemctl", "disable", "--now", *names], capture_output=True, check=False)
    for role in roles:
        if layout.unit_path(role).exists():
            layout.unit_path(role).unlink()
            removed.append(str(layout.unit_path(role)))
    if systemd and shutil.which("systemctl"):
        subprocess.run(["systemctl", "daemon-reload"], capture_output=True, check=False)
    link = Path("/usr/local/bin/appliance")
    if layout.is_system and link.is_symlink() and link.resolve() == layout.wrapper.resolve():
        link.unlink()
    for path in (layout.venv, layout.wrapper.parent):
        if path.exists():
            shutil.rmtree(path)
            removed.append(str(path))
    layout.state_file.unlink(missing_ok=True)
    if purge:
        for path in (layout.etc_dir, layout.data_dir):
            if path.exists():
                shutil.rmtree(path)
                removed.append(str(path))
        for path in (layout.units_dir, layout.etc_dir.parent, layout.prefix):
            if path.is_dir() and not any(path.iterdir()) and path != Path("/etc/systemd/system"):
                path.rmdir()
    return removed
