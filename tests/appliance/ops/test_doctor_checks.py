"""``appliance doctor``'s runtime checks against real parts: a 1-token generation on the
embedded engine's SGLang-compatible server, the real API's /health, the real index files, and
GPU headroom from recorded ``nvidia-smi`` outputs."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from support.paths import FIXTURES
from support.servers import free_port, serving

from appliance.api.chat import build_api
from appliance.ops.doctor import run_checks
from appliance.ops.doctor_runtime import app_check, engine_check, gpu_headroom, index_check
from engine.sglang.client import SGLangEngine
from engine.sglang.gpu_info import parse_nvidia_smi

FIX = FIXTURES / "sglang"


def gpus(name: str):  # noqa: ANN201
    return parse_nvidia_smi((FIX / f"nvidia_smi_{name}.csv").read_text())


def test_gpu_headroom_from_recorded_outputs() -> None:
    ok = gpu_headroom(gpus("2xh100"), "h100")
    assert ok.ok and "GPU0 79.6 GiB free" in ok.detail and "GPU1" in ok.detail
    # an H200 (143,771 MiB) where another process holds 136 GiB: 4.4 GiB left < 8 GiB headroom
    busy = [replace(g, memory_used_mib=136 * 1024) for g in gpus("h200")]
    bad = gpu_headroom(busy, "h200")
    assert not bad.ok and "GPU0 has 4.4 GiB free (< 8 GiB)" in bad.detail
    assert "nvidia-smi" in bad.detail and "--mem-fraction-static" in bad.detail
    assert gpu_headroom([], "cpu").ok
    none = gpu_headroom([], "h100")
    assert not none.ok and "NVIDIA driver" in none.detail


def test_engine_check_generates_one_token(base: str, config_for, model_dir, tmp_path) -> None:  # noqa: ANN001
    config = config_for(tmp_path, model_dir, engine={"backend": "sglang", "sglang_url": base})
    good = engine_check(config)
    assert good.ok and "1-token generation in" in good.detail, good.detail
    dead = f"http://127.0.0.1:{free_port()}"
    config = config_for(tmp_path, model_dir, engine={"backend": "sglang", "sglang_url": dead})
    bad = engine_check(config)
    assert not bad.ok and dead in bad.detail
    assert "journalctl -u appliance-engine" in bad.detail


def test_app_check_reports_the_apps_view_of_its_engine(appliance, tmp_path) -> None:  # noqa: ANN001
    port = free_port()
    config = appliance.config.model_copy(
        update={"server": appliance.config.server.model_copy(update={"port": port})}
    )
    idle = app_check(config)
    assert idle.ok and idle.warn and "not serving" in idle.detail
    dead_engine = SGLangEngine(f"http://127.0.0.1:{free_port()}", connect_retries=0)
    api = build_api(appliance.auth, appliance.chat, dead_engine)
    with serving(api) as url:
        served = config.model_copy(
            update={"server": config.server.model_copy(update={"port": int(url.rsplit(":", 1)[1])})}
        )
        result = app_check(served)
    dead_engine.close()
    assert not result.ok and "503" in result.detail and "engine check" in result.detail


def test_index_check_on_real_index_files(appliance, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    good = index_check(appliance.config)
    assert good.ok and not good.warn and "vectors (flat" in good.detail, good.detail
    # a copy of the data dir whose FAISS file is damaged
    data = tmp_path / "data"
    shutil.copytree(appliance.config.paths.data_dir, data, ignore=shutil.ignore_patterns("models"))
    config = appliance.config.model_copy(
        update={
            "paths": appliance.config.paths.model_copy(update={"data_dir": data}),
            "database": appliance.config.database.model_copy(
                update={"url": f"sqlite:///{data / 'appliance.db'}"}
            ),
        }
    )
    switched = config.model_copy(
        update={"rag": config.rag.model_copy(update={"embedding_model_path": "/srv/m/bge-m3"})}
    )
    mixed = index_check(switched)  # the config names another embedder than the index's
    assert (
        not mixed.ok and "'bge-m3'" in mixed.detail and "appliance ingest --reindex" in mixed.detail
    )
    (data / "index" / "vectors.faiss").write_bytes(b"\0" * 64)
    bad = index_check(config)
    assert not bad.ok and "unreadable" in bad.detail and "rebuilds it" in bad.detail
    shutil.rmtree(data / "index")
    missing = index_check(config)
    assert missing.ok and missing.warn and "re-embeds" in missing.detail

    assert run_checks(config, (index_check,)) == 0
    (data / "index").mkdir()
    (data / "index" / "manifest.json").write_text("{not json")
    assert run_checks(config, (index_check,)) == 1
    out = capsys.readouterr().out
    assert "[FAIL] index" in out and "1 check(s) failed" in out
    (data / "index" / "manifest.json").write_text("[1, 2]")  # JSON, but not a manifest
    listed = index_check(config)
    assert not listed.ok and "not a JSON object" in listed.detail


def test_engine_check_names_the_runtime_and_warns_without_a_compiler(
    config_for, model_dir, tmp_path, monkeypatch
) -> None:  # noqa: ANN001
    from engine.embedded.native import unsupported_reason

    config = config_for(tmp_path / "a", model_dir)
    good = engine_check(config)
    assert good.ok and "1-token generation in" in good.detail, good.detail
    assert "runner" in good.detail  # the runtime: which runner and which kernels
    if unsupported_reason() is not None:
        pytest.skip(f"this CPU cannot run the native kernels: {unsupported_reason()}")
    assert not good.warn and "avx512-bf16 kernels" in good.detail
    # a compiler that fails, and no library built yet: PyTorch attention, and a warning
    monkeypatch.setenv("CC", "false")
    degraded = engine_check(config_for(tmp_path / "b", model_dir))
    assert degraded.ok and degraded.warn, degraded.detail
    assert "PyTorch attention" in degraded.detail and "apt-get install gcc" in degraded.detail


def test_ocr_check_names_what_to_install(config_for, model_dir, tmp_path) -> None:  # noqa: ANN001
    from appliance.ops.doctor_ocr import ocr_check

    def config(**rag):  # noqa: ANN003, ANN202
        return config_for(tmp_path, model_dir, rag=rag)

    missing = ocr_check(config(ocr_binary=str(tmp_path / "no-tesseract")))
    assert not missing.ok and "tesseract-ocr tesseract-ocr-kor tesseract-ocr-eng" in missing.detail
    off = ocr_check(config(ocr=False))
    assert off.ok and "rag.ocr = false" in off.detail
    if shutil.which("tesseract") is None:
        pytest.skip("tesseract is not installed (apt-get install tesseract-ocr tesseract-ocr-kor)")
    found = ocr_check(config())
    assert found.ok and found.detail == "tesseract with kor, eng"
    lacking = ocr_check(config(ocr_languages="kor+eng+zzz"))
    assert not lacking.ok and lacking.detail.endswith("apt-get install tesseract-ocr-zzz")
