"""systemd units (pure string templates) for the SGLang server and the model gateway.

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


def server_unit(
    plan: LaunchPlan,
    *,
    user: str = "sglang",
    working_directory: str = "/opt/rag-appliance",
    environment: Mapping[str, str] | None = None,
    timeout_start_sec: int = 1800,
) -> str:
    """The SGLang server unit; model load plus CUDA-graph capture can take many minutes."""
    env = {**SERVER_ENV, **(environment or {})}
    return render_unit(
        UnitSpec(
            description=f"SGLang engine for the RAG appliance ({plan.served_model_name})",
            argv=plan.argv,
            user=user,
            working_directory=working_directory,
            environment=env,
            timeout_start_sec=timeout_start_sec,
        )
    )


def gateway_unit(
    config: GatewayConfig,
    *,
    user: str = "sglang",
    working_directory: str = "/opt/rag-appliance",
    environment: Mapping[str, str] | None = None,
) -> str:
    """The model gateway unit (cache-aware routing over the worker nodes)."""
    return render_unit(
        UnitSpec(
            description="SGLang model gateway (smg, cache-aware routing)",
            argv=config.argv(),
            user=user,
            working_directory=working_directory,
            environment=dict(environment or {}),
            restart_sec=5,
            timeout_start_sec=120,
        )
    )
