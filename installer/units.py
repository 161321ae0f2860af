"""The appliance's systemd units (pure): engine worker(s), app, and the gateway.

A GPU box whose model fits on fewer GPUs than it has runs one SGLang worker per GPU group
(``engine.sglang.tuning``): units ``engine``, ``engine-1``, ... each pinned to its GPUs and
port, and a gateway unit in front of them (cache-aware routing) that the app talks to. On
multi-node sites the gateway also routes to the remote workers given with ``--workers``.

All go through ``engine.sglang.units.render_unit``, so every unit has ``Restart=on-failure``; the
engine comes back within ``RestartSec`` after a crash and the app, a client of it, stays up. The
SGLang server and gateway units are ``engine.sglang.units.server_spec`` and ``gateway_spec`` (the
``appliance gateway unit`` command renders the same gateway unit); the embedded CPU engine and
the app are built here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.sglang.gateway import gateway_for
from engine.sglang.gpu_info import GpuInfo
from engine.sglang.model_shape import load_shape
from engine.sglang.tuning import BoxPlan, SiteNeeds, tune
from engine.sglang.units import SERVER_ENV, UnitSpec, gateway_spec, render_unit, server_spec
from installer.layout import Layout, unit_name, worker_role
from installer.profiles import GATEWAY_PORT, Options

APP_ENV = {**SERVER_ENV, "GRADIO_ANALYTICS_ENABLED": "False"}


@dataclass(frozen=True)
class Rendered:
    """The unit texts by role, and the tuned SGLang plan where there is one."""

    units: dict[str, str]
    plan: BoxPlan | None = None


def _cli(layout: Layout, *args: str) -> tuple[str, ...]:
    return (str(layout.appliance_bin), "--config", str(layout.config_file), *args)


def gpu_plan(
    gpus: tuple[GpuInfo, ...], model_dir: Path, opts: Options, layout: Layout, host_ram_gb: float
) -> BoxPlan:
    """The tuned SGLang workers for this box and model (see ``engine.sglang.tuning``)."""
    shape = load_shape(model_dir)
    site = SiteNeeds(opts.context_length, opts.concurrency, host_ram_gb)
    return tune(
        list(gpus),
        shape,
        site,
        model_path=str(model_dir),
        port=opts.engine_port,
        python=str(layout.python),
        speculative=opts.speculative,
    )


def _cpu_engine_spec(layout: Layout, opts: Options, user: str) -> UnitSpec:
    argv = _cli(layout, "engine-server", "--host", "127.0.0.1", "--port", str(opts.engine_port))
    return UnitSpec(
        "RAG appliance engine (embedded CPU engine, SGLang API)",
        argv,
        user,
        str(layout.data_dir),
        {**APP_ENV, "APPLIANCE_ENGINE__BACKEND": "embedded"},
        restart_sec=2,
        timeout_start_sec=600,
        timeout_stop_sec=30,
    )


def _app_spec(layout: Layout, user: str, after: tuple[str, ...]) -> UnitSpec:
    return UnitSpec(
        "RAG appliance web app (chat, API, admin)",
        _cli(layout, "serve"),
        user,
        str(layout.data_dir),
        APP_ENV,
        restart_sec=3,
        timeout_start_sec=600,
        timeout_stop_sec=30,
        after=after,
    )


def gateway_workers(profile: str, opts: Options, plan: BoxPlan | None) -> tuple[str, ...]:
    """The workers the gateway routes to (none: no gateway): this box's own when it runs
    several, plus the remote ones on multi-node sites."""
    local = plan.worker_urls if plan is not None else ()
    remote = tuple(u.rstrip("/") for u in opts.workers) if profile == "multi-node" else ()
    if profile != "multi-node" and len(local) < 2:
        return ()
    return tuple(dict.fromkeys((*local, *remote)))


def box_plan(
    profile: str, opts: Options, layout: Layout, gpus: tuple[GpuInfo, ...], host_ram_gb: float
) -> BoxPlan | None:
    """This box's SGLang workers, or None where it runs none (cpu, or a GPU-less gateway)."""
    if profile == "cpu" or not gpus:
        return None
    if opts.model_dir is None:
        raise ValueError("GPU profiles need the model directory (--model-dir DIR)")
    return gpu_plan(gpus, opts.model_dir, opts, layout, host_ram_gb)


def render_units(
    profile: str,
    layout: Layout,
    opts: Options,
    user: str,
    gpus: tuple[GpuInfo, ...] = (),
    host_ram_gb: float = 0.0,
) -> Rendered:
    """Every unit this profile needs, by role (``engine``, ``engine-1``..., ``gateway``,
    ``app``)."""
    wd = str(layout.data_dir)
    specs: dict[str, UnitSpec] = {}
    plan = box_plan(profile, opts, layout, gpus, host_ram_gb)
    if profile == "cpu":
        specs["engine"] = _cpu_engine_spec(layout, opts, user)
    elif plan is not None:
        for index, worker in enumerate(plan.workers):
            specs[worker_role(index)] = server_spec(worker, user=user, working_directory=wd)
    routed = gateway_workers(profile, opts, plan)
    if routed:
        gateway = gateway_for(routed, port=GATEWAY_PORT, python=str(layout.python))
        specs["gateway"] = gateway_spec(gateway, user=user, working_directory=wd)
    after = ["network-online.target", *(unit_name(r) for r in specs)]
    specs["app"] = _app_spec(layout, user, tuple(after))
    return Rendered({role: render_unit(spec) for role, spec in specs.items()}, plan)
