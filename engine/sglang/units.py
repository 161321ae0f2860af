"""systemd units (pure string templates); the one place that says what the SGLang server and the
model gateway units are (``server_spec``, ``gateway_spec``), for the installer and the CLI.

``ExecStart`` is the exact tuned command, shell-quoted (systemd accepts single quotes); ``%``
and ``$`` are doubled so systemd does not expand them as specifiers or variables.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from engine.sglang.gateway import GatewayConfig
from engine.sglang.tuning import LaunchPlan

SERVER_ENV: Mapping[str, str] = {
    "HF_HUB_OFFLINE": "1",  # air-gapped: never reach a model hub
    "TRANSFORMERS_OFFLINE": "1",
    "PYTHONUNBUFFERED": "1",
}


@dataclass(frozen=True)
class UnitSpec:
    """Everything one service unit says."""

    description: str
    argv: tuple[str, ...]
    user: str
    working_directory: str
    environment: Mapping[str, str] = field(default_factory=dict)
    restart_sec: int = 10
    timeout_start_sec: int = 1800
    timeout_stop_sec: int = 60
    after: tuple[str, ...] = ("network-online.target",)


def systemd_escape(command: str) -> str:
    """Escape systemd's specifier (``%``) and variable (``$``) characters."""
    return command.replace("%", "%%").replace("$", "$$")


def exec_start(argv: tuple[str, ...] | list[str]) -> str:
    """The ``ExecStart`` value for an argv."""
    return systemd_escape(shlex.join(argv))


def render_unit(spec: UnitSpec) -> str:
    """The unit file text."""
    after = " ".join(spec.after)
    lines = [
        "[Unit]",
        f"Description={spec.description.replace('%', '%%')}",
        f"After={after}",
        f"Wants={after}",
        "",
        "[Service]",
        "Type=simple",
        f"User={spec.user}",
        f"Group={spec.user}",
        f"WorkingDirectory={spec.working_directory}",
    ]
    for key, value in sorted(spec.environment.items()):
        lines.append(f'Environment="{key}={systemd_escape(value)}"')
    lines += [
        f"ExecStart={exec_start(spec.argv)}",
        "Restart=on-failure",
        f"RestartSec={spec.restart_sec}",
        f"TimeoutStartSec={spec.timeout_start_sec}",
        f"TimeoutStopSec={spec.timeout_stop_sec}",
        "KillMode=mixed",
        "LimitNOFILE=65536",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ]
    return "\n".join(lines)


def server_spec(plan: LaunchPlan, *, user: str, working_directory: str) -> UnitSpec:
    """One SGLang worker's unit (the engine on GPU sites), pinned to its GPU group when the box
    is split; model load plus CUDA-graph capture can take many minutes, hence the long start
    timeout."""
    gpus = f", GPUs {','.join(map(str, plan.gpu_ids))}" if plan.gpu_ids else ""
    return UnitSpec(
        description=(
            f"RAG appliance engine (SGLang, {plan.served_model_name}, tp={plan.tp}{gpus}, "
            f"port {plan.port})"
        ),
        argv=plan.argv,
        user=user,
        working_directory=working_directory,
        environment={**SERVER_ENV, **plan.environment},
        restart_sec=10,
        timeout_start_sec=1800,
        timeout_stop_sec=60,
    )


def gateway_spec(config: GatewayConfig, *, user: str, working_directory: str) -> UnitSpec:
    """The model gateway unit (cache-aware routing over the worker nodes)."""
    return UnitSpec(
        description="RAG appliance model gateway (smg, cache-aware routing)",
        argv=config.argv(),
        user=user,
        working_directory=working_directory,
        environment=dict(SERVER_ENV),
        restart_sec=5,
        timeout_start_sec=120,
        timeout_stop_sec=60,
    )
