"""The ``appliance`` command as a user runs it (real subprocesses)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def appliance(*args: str, env: dict | None = None, cwd: Path | None = None):  # noqa: ANN201
    clean = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    return subprocess.run(
        [sys.executable, "-m", "appliance.cli", *args],
        capture_output=True,
        text=True,
        env={**clean, **(env or {})},
        cwd=cwd,
        timeout=600,
    )


def test_help_lists_the_subcommands() -> None:
    out = appliance("--help")
    assert out.returncode == 0
    for command in ("serve", "ingest", "bench", "doctor", "users"):
        assert command in out.stdout


def test_bad_config_value_is_one_line_naming_the_key(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[server]\nport = "eighty"\n', encoding="utf-8")
    out = appliance("--config", str(cfg), "doctor")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "server.port" in lines[0]

    out = appliance("doctor", env={"APPLIANCE_ENGINE__MAX_NEW_TOKENS": "lots"})
    assert out.returncode == 2 and "engine.max_new_tokens" in out.stderr

    cfg.write_text("[engine]\nturbo = true\n", encoding="utf-8")
    out = appliance("--config", str(cfg), "doctor")
    assert out.returncode == 2 and "engine.turbo: unknown key" in out.stderr


def test_unknown_benchmark_is_refused_with_the_list() -> None:
    out = appliance("bench", "turbo")
    assert out.returncode == 2 and "engine" in out.stderr and "index" in out.stderr


def test_engine_benchmark_prints_its_table(model_dir: Path) -> None:
    out = appliance(
        "bench", "engine", "--quick", env={"APPLIANCE_ENGINE__MODEL_PATH": str(model_dir)}
    )
    assert out.returncode == 0, out.stderr
    for measure in ("TTFT", "decode tokens/s", "RAG batch", "peak RSS"):
        assert measure in out.stdout


def test_users_and_doctor_on_a_fresh_data_dir(tmp_path: Path) -> None:
    env = {"APPLIANCE_PATHS__DATA_DIR": str(tmp_path / "data")}
    doctor = appliance("doctor", env=env)
    assert doctor.returncode == 1 and "appliance serve" in doctor.stdout
    made = appliance("users", "create", "kim", "--password", "s3cret-pass", env=env)
    assert made.returncode == 0, made.stderr
    again = appliance("users", "create", "kim", "--password", "s3cret-pass", env=env)
    assert again.returncode == 1 and "already exists" in again.stderr
    listed = appliance("users", "list", env=env)
    assert "kim\tstaff\tdefault" in listed.stdout
    granted = appliance("users", "grant", "kim", "--collections", "hr,it", env=env)
    assert granted.returncode == 0 and "hr, it" in granted.stdout
    assert "kim\tstaff\thr,it" in appliance("users", "list", env=env).stdout
    short = appliance("users", "create", "lee", "--password", "short", env=env)
    assert short.returncode == 1 and "at least 8" in short.stderr
    doctor = appliance("doctor", env=env)
    assert "[ok] database" in doctor.stdout


def test_gateway_is_rendered_from_the_configured_workers(tmp_path: Path) -> None:
    cfg = tmp_path / "multi.toml"
    cfg.write_text(
        'profile = "multi-node"\n[engine]\nbackend = "sglang"\n'
        'sglang_url = "http://127.0.0.1:30080"\n'
        'sglang_worker_urls = ["http://10.0.0.11:30000", "http://10.0.0.12:30000"]\n',
        encoding="utf-8",
    )
    out = appliance("--config", str(cfg), "gateway", "command")
    assert out.returncode == 0, out.stderr
    assert "--policy cache_aware" in out.stdout
    assert "--worker-urls http://10.0.0.11:30000 http://10.0.0.12:30000" in out.stdout
    assert "--port 30080" in out.stdout
    unit = appliance("--config", str(cfg), "gateway", "unit")
    assert "Restart=on-failure" in unit.stdout and "smg launch" in unit.stdout
    none = appliance("gateway", "command")
    assert none.returncode == 2 and "sglang_worker_urls" in none.stderr
