"""SGLang launch tuning, units and gateway: pure plans from recorded fixtures. No GPU, no SGLang
needed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.paths import FIXTURES, REPO

from engine.sglang.gateway import GatewayConfig, gateway_for
from engine.sglang.gpu_info import GpuInfo, match_profile, parse_nvidia_smi
from engine.sglang.hicache import hicache_for, usable_host_gb
from engine.sglang.model_shape import ModelShape, shape_from_config
from engine.sglang.speculative import without_incompatible
from engine.sglang.tuning import BoxPlan, DoesNotFit, LaunchPlan, SiteNeeds, tune
from engine.sglang.units import exec_start, gateway_spec, render_unit, server_spec

FIX = FIXTURES / "sglang"
SITE = SiteNeeds(context_length=32768, concurrency=32, host_ram_gb=64)
ONCE_FLAGS = (
    "--enable-metrics",
    "--enable-cache-report",
    "--schedule-policy",
    "--radix-eviction-policy",
    "--grammar-backend",
    "--tp-size",
    "--mem-fraction-static",
    "--chunked-prefill-size",
    "--max-running-requests",
    "--context-length",
    "--nccl-port",
)


def gpus(name: str) -> list[GpuInfo]:
    return parse_nvidia_smi((FIX / f"nvidia_smi_{name}.csv").read_text())


def shape(size: str) -> ModelShape:
    return shape_from_config(json.loads((FIX / f"config_{size}.json").read_text()), name=size)


def box_for(box: str, size: str, site: SiteNeeds = SITE, **kw: Any) -> BoxPlan:
    return tune(gpus(box), shape(size), site, model_path=f"/models/{size}", **kw)


def plan_for(box: str, size: str, site: SiteNeeds = SITE, **kw: Any) -> LaunchPlan:
    """The launch of a box that runs one worker."""
    plan = box_for(box, size, site, **kw)
    assert len(plan.workers) == 1
    return plan.first


def flag(plan: LaunchPlan, name: str) -> str:
    return plan.argv[plan.argv.index(name) + 1]


# ---- parsing ---------------------------------------------------------------------------------


def test_nvidia_smi_fixtures_parse_and_match_profiles() -> None:
    expected = {"h100": "h100", "h200": "h200", "a100": "a100-80g", "l40s": "l40s"}
    for box, key in expected.items():
        [gpu] = gpus(box)
        assert match_profile(gpu.name).key == key
    two = gpus("2xh100")
    assert [g.index for g in two] == [0, 1]
    assert two[0].memory_total_mib == 81559 and two[0].driver_version == "550.54.15"
    assert match_profile("Tesla T4").key == "generic"
    with pytest.raises(ValueError):
        parse_nvidia_smi("NVIDIA H100, 81559\n")


def test_model_shapes_from_config() -> None:
    s8, s32 = shape("8b"), shape("32b")
    # 8B: 2 x 32 layers x 8 kv heads x 128 x 2 bytes = 131,072 B/token (128 KiB)
    assert (s8.num_layers, s8.num_kv_heads, s8.head_dim, s8.dtype_bytes) == (32, 8, 128, 2)
    assert s8.kv_bytes_per_token == 131_072
    # params = 32 x (2*4096*32*128 + 2*4096*8*128 + 3*4096*14336 + 2*4096)
    #          + 2*128256*4096 (untied embed + head) + 4096 = 8,030,261,248 (Llama-3.1-8B: 8.03B)
    assert s8.param_count == 8_030_261_248
    assert s8.max_position_embeddings == 131072
    # 32B: head_dim = 5120 / 40 = 128; 2 x 64 x 8 x 128 x 2 = 262,144 B/token
    assert s32.head_dim == 128 and s32.kv_bytes_per_token == 262_144
    # 64 x (2*5120*40*128 + 2*5120*8*128 + 3*5120*27648 + 2*5120) + 2*152064*5120 + 5120
    assert s32.param_count == 32_763_417_600
    assert shape_from_config({**_cfg32(), "torch_dtype": "float32"}).dtype_bytes == 4
    fp8 = {**_cfg32(), "quantization_config": {"quant_method": "fp8"}}
    assert shape_from_config(fp8).dtype_bytes == 1
    assert shape_from_config(_cfg32(), param_count=123).param_count == 123


def _cfg32() -> dict:
    return json.loads((FIX / "config_32b.json").read_text())


# ---- tuning ----------------------------------------------------------------------------------


def test_h100_8b_hand_checked() -> None:
    plan = plan_for("h100", "8b")
    # per GPU 81559 MiB = 85,520,809,984 B = 79.65 GiB; reserve = 3 (act @8192) + 2 (graphs)
    # + 6 (headroom) = 11 GiB -> 1 - 11/79.65 = 0.8619 -> floored 0.861 (band 0.85-0.88)
    assert plan.mem_fraction_static == 0.861
    assert 0.85 <= plan.mem_fraction_static <= 0.88
    # weights 8,030,261,248 x 2 = 16,060,522,496 B (14.96 GiB)
    assert plan.weights_bytes == 16_060_522_496
    # (0.861 x 85,520,809,984 - 16,060,522,496) / 131,072 = 57,572,894,900 / 131,072 = 439,246
    assert plan.kv_capacity_tokens == 439_246
    assert plan.tp == 1 and flag(plan, "--tp-size") == "1"
    assert flag(plan, "--max-running-requests") == "107"  # 439,246 // 4096
    assert flag(plan, "--chunked-prefill-size") == "8192"
    assert flag(plan, "--schedule-policy") == "lpm"
    assert flag(plan, "--radix-eviction-policy") == "lru"
    assert flag(plan, "--grammar-backend") == "xgrammar"
    assert flag(plan, "--context-length") == "32768"
    assert flag(plan, "--mem-fraction-static") == "0.861"
    assert (flag(plan, "--host"), flag(plan, "--port")) == ("127.0.0.1", "30000")
    assert flag(plan, "--served-model-name") == "8b"
    assert plan.argv[:5] == ("python", "-m", "sglang.launch_server", "--model-path", "/models/8b")
    for name in ONCE_FLAGS:
        assert plan.argv.count(name) == 1, name
    assert plan.capacity(32768) == 13  # 439,246 // 32,768
    # 64 GB host RAM: half is 32 GB < 2 x the 57.6 GB pool -> no HiCache
    assert "--enable-hierarchical-cache" not in plan.argv and plan.hicache_ratio is None


def test_2xh100_32b_needs_tp2_hand_checked() -> None:
    plan = plan_for("2xh100", "32b")
    # weights 32,763,417,600 x 2 = 65,526,835,200 B (61.0 GiB)
    # one card: 0.861 x 85,520,809,984 - 65,526,835,200 = 8,106,582,196 B -> 30,924 tokens,
    # below the site budget 32 x 4096 = 131,072 tokens (and one 32k context) -> tp=2:
    # 2 x 73,633,417,396 - 65,526,835,200 = 81,739,999,592 B / 262,144 = 311,813 tokens
    assert plan.tp == 2 and flag(plan, "--tp-size") == "2"
    assert plan.kv_capacity_tokens == 311_813
    assert 0.85 <= plan.mem_fraction_static <= 0.88
    assert flag(plan, "--max-running-requests") == "76"  # 311,813 // 4096
    assert flag(plan, "--chunked-prefill-size") == "8192"  # 311,813 >= 1.25 x 131,072
    for name in ONCE_FLAGS:
        assert plan.argv.count(name) == 1, name
    with pytest.raises(DoesNotFit):
        plan_for("h100", "32b")  # one 80 GB card cannot hold weights + a 32k context


def test_profiles_fraction_bands_and_chunking() -> None:
    h200 = plan_for("h200", "8b")
    assert 0.88 <= h200.mem_fraction_static <= 0.90
    assert h200.mem_fraction_static > plan_for("h100", "8b").mem_fraction_static
    a100 = plan_for("a100", "8b")
    assert 0.85 <= a100.mem_fraction_static <= 0.88 and a100.chunked_prefill_size == 8192
    l40s = plan_for("l40s", "8b")
    assert l40s.mem_fraction_static < 0.85 and l40s.chunked_prefill_size == 4096
    busy = plan_for("l40s", "8b", SiteNeeds(32768, 64, 64))  # budget 262,144 > capacity
    assert busy.chunked_prefill_size == 2048
    busy_box = box_for("l40s", "8b", SiteNeeds(32768, 64, 64))
    assert any("peaks queue" in w for w in busy_box.warnings)


def _box(n: int, memory_mib: int = 81559, name: str = "NVIDIA H100 80GB HBM3") -> list[GpuInfo]:
    return [GpuInfo(i, name, memory_mib, 0, "550.54.15") for i in range(n)]


def test_no_idle_gpus_one_worker_per_gpu_group() -> None:
    # 2 x H100, 8B: one card holds 439k KV tokens (>= the 131k budget): a worker per card
    two = box_for("2xh100", "8b")
    assert [w.gpu_ids for w in two.workers] == [(0,), (1,)] and not two.idle_gpus
    assert [w.port for w in two.workers] == [30000, 30001] and two.needs_gateway
    assert not any("unused" in w for w in two.warnings)
    for worker in two.workers:
        assert flag(worker, "--tp-size") == "1" and flag(worker, "--port") == str(worker.port)
        assert flag(worker, "--nccl-port") == str(worker.port + 1000)  # set: never a race
        assert worker.environment["CUDA_VISIBLE_DEVICES"] == str(worker.gpu_ids[0])
        assert worker.environment["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
        assert worker.command().startswith(
            f"CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES={worker.gpu_ids[0]} "
        )
        assert flag(worker, "--max-running-requests") == str(worker.kv_capacity_tokens // 4096)
    assert two.kv_capacity_tokens == 2 * two.first.kv_capacity_tokens
    assert two.capacity(32768) == 2 * two.first.capacity(32768)
    # the 32B needs both cards for one context: one worker over both, no pinning
    assert len(box_for("2xh100", "32b").workers) == 1 and not box_for("2xh100", "32b").first.gpu_ids
    # 8 x H100: 8 workers of one GPU; a 70B-class model (no fit on 2) gets 2 workers of 4
    eight = tune(_box(8), shape("8b"), SITE, model_path="/m")
    assert len(eight.workers) == 8 and [w.port for w in eight.workers] == list(range(30000, 30008))
    big = shape_from_config(
        {**_cfg32(), "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
         "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 128256},
        name="70b",
    )  # fmt: skip
    seventy = tune(_box(8), big, SITE, model_path="/m")
    assert [w.gpu_ids for w in seventy.workers] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert {flag(w, "--tp-size") for w in seventy.workers} == {"4"}
    # 6 cards: groups of 4 leave 2 idle, and the plan says so
    six = tune(_box(6), big, SITE, model_path="/m")
    assert six.idle_gpus == (4, 5) and any("GPU(s) 4, 5 unused" in w for w in six.warnings)
    # each worker is tuned for its share: 2 x H100 at 64 sessions -> 32 each, as one card at 32
    shared = box_for("2xh100", "8b", SiteNeeds(32768, 64, 64))
    alone = plan_for("h100", "8b", SiteNeeds(32768, 32, 32))
    assert (
        shared.first.argv[shared.first.argv.index("--tp-size") :]
        == alone.argv[alone.argv.index("--tp-size") :]
    )


def test_hicache_when_host_ram_allows() -> None:
    plan = plan_for("h100", "8b", SiteNeeds(32768, 32, 512))
    # pool 57.6 GB; (512 - 16 - 10.7) x 0.8 = 388 GB usable -> capped at 4 x pool = 230 GB
    assert plan.hicache_size_gb == 230 and plan.hicache_ratio == 3.9
    assert flag(plan, "--hicache-size") == "230" and "--hicache-ratio" not in plan.argv
    assert flag(plan, "--hicache-write-policy") == "write_through"
    assert flag(plan, "--hicache-io-backend") == "kernel"
    assert flag(plan, "--hicache-mem-layout") == "page_first"
    assert flag(plan, "--page-size") == "64" and plan.page_size == 64
    assert plan.argv.count("--enable-hierarchical-cache") == 1
    # 64 GB: (64 - 26.7) x 0.8 = 29.8 GB < 2 x pool -> off, SGLang's page size 1
    off = plan_for("h100", "8b", SiteNeeds(32768, 32, 64))
    assert off.hicache_ratio is None and off.hicache_size_gb == 0 and off.page_size == 1
    assert not any(a.startswith(("--hicache", "--page-size")) for a in off.argv)


def test_hicache_sizes_per_worker_and_per_tp_rank() -> None:
    usable = usable_host_gb(1024)
    assert usable_host_gb(1024, 2) == pytest.approx(usable / 2)
    assert usable_host_gb(8) == 0.0
    # 2 x H100, 8B: two workers, each sized from half the usable RAM
    two = box_for("2xh100", "8b", SiteNeeds(32768, 64, 512))
    assert len(two.workers) == 2
    one = plan_for("h100", "8b", SiteNeeds(32768, 32, 512))
    pool = one.kv_capacity_tokens * one.kv_bytes_per_token
    assert all(w.hicache_size_gb == int(usable_host_gb(512, 2)) for w in two.workers)
    assert two.first.hicache_size_gb * 1e9 <= 4 * pool
    # tp 2: --hicache-size is per rank, so the worker's share is halved
    tp2 = box_for("2xh100", "32b", SiteNeeds(32768, 32, 384)).first
    assert tp2.tp == 2 and tp2.hicache_size_gb == int(usable_host_gb(384) / 2)
    assert hicache_for(100, 0, 1) is None and hicache_for(100, 1e9, 0) is None


def test_ngram_is_an_option_off_by_default() -> None:
    default = plan_for("h200", "8b", SiteNeeds(32768, 32, 1024))
    assert default.speculative == "" and not any("speculative" in a for a in default.argv)
    ngram = plan_for("h200", "8b", SiteNeeds(32768, 32, 1024), speculative="ngram")
    assert ngram.speculative == "ngram"
    assert flag(ngram, "--speculative-algorithm") == "NGRAM"
    assert flag(ngram, "--speculative-num-draft-tokens") == "12"
    assert flag(ngram, "--speculative-ngram-max-bfs-breadth") == "10"
    assert flag(ngram, "--speculative-ngram-max-trie-depth") == "18"
    # SGLang's own cap for speculative servers; HiCache stays, at page size 1 (draft tree)
    assert ngram.max_running_requests == 48 < default.max_running_requests
    assert "--enable-hierarchical-cache" in ngram.argv and "--page-size" not in ngram.argv
    assert ngram.page_size == 1
    argv = ["--enable-mixed-chunk", "--tp-size", "1"]
    assert without_incompatible(argv) == ["--tp-size", "1"]
    with pytest.raises(ValueError):
        plan_for("h100", "8b", speculative="eagle")


def test_capacity_decreases_with_context_and_context_is_capped() -> None:
    plan = plan_for("h100", "8b")
    caps = [plan.capacity(c) for c in (2048, 4096, 8192, 16384, 32768)]
    assert caps == sorted(caps, reverse=True) and caps[0] > caps[-1] > 0
    capped = box_for("h200", "32b", SiteNeeds(131072, 8, 64))
    assert capped.first.context_length == 32768 and any("capped" in w for w in capped.warnings)
    with pytest.raises(ValueError):
        tune([], shape("8b"), SITE, model_path="/m")


def test_command_is_shell_quoted() -> None:
    plan = tune(gpus("h100"), shape("8b"), SITE, model_path="/models/my model").first
    assert "'/models/my model'" in plan.command()
    echoed = subprocess.run(
        ["sh", "-c", f"printf '%s\\n' {plan.command()}"], capture_output=True, text=True
    )
    assert echoed.stdout.splitlines() == list(plan.argv)


# ---- units and gateway -----------------------------------------------------------------------


def test_server_unit(tmp_path: Path) -> None:
    plan = plan_for("h100", "8b", python=sys.executable)
    unit = render_unit(server_spec(plan, user="sglang", working_directory=str(tmp_path)))
    assert f"ExecStart={plan.command()}\n" in unit
    assert "Restart=on-failure" in unit and "User=sglang" in unit
    assert "RestartSec=10\n" in unit and "TimeoutStartSec=1800" in unit
    assert "TimeoutStopSec=60" in unit and 'Environment="HF_HUB_OFFLINE=1"' in unit
    assert f"(SGLang, {plan.served_model_name}, tp=1, port 30000)" in unit
    assert exec_start(("a", "50%", "$HOME")) == "a 50%% '$$HOME'"
    _systemd_verify(tmp_path / "rag-sglang.service", unit)


def test_gateway_command_and_unit(tmp_path: Path) -> None:
    urls = ["http://10.0.0.1:30000", "http://10.0.0.2:30000/", "http://10.0.0.3:30000"]
    cfg = gateway_for(urls, python=sys.executable)
    argv = cfg.argv()
    assert argv[1:4] == ("-m", "smg", "launch")
    assert argv[argv.index("--policy") + 1] == "cache_aware"
    for url in urls:
        assert url.rstrip("/") in argv
    assert argv[argv.index("--cache-threshold") + 1] == "0.3"
    assert argv[argv.index("--balance-abs-threshold") + 1] == "64"
    assert argv[argv.index("--balance-rel-threshold") + 1] == "1.5"
    unit = render_unit(gateway_spec(cfg, user="sglang", working_directory=str(tmp_path)))
    assert f"ExecStart={cfg.command()}\n" in unit and "Restart=on-failure" in unit
    assert "RestartSec=5\n" in unit and "TimeoutStartSec=120" in unit
    assert 'Environment="HF_HUB_OFFLINE=1"' in unit
    _systemd_verify(tmp_path / "rag-gateway.service", unit)
    for bad in ((), ("10.0.0.1:30000",), ("http://a:1", "http://a:1")):
        with pytest.raises(ValueError):
            GatewayConfig(worker_urls=bad)


def _systemd_verify(path: Path, unit: str) -> None:
    path.write_text(unit)
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze not installed: unit syntax not verified")
    done = subprocess.run(
        ["systemd-analyze", "verify", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_plan_cli_help_and_table(tmp_path: Path) -> None:
    run = [sys.executable, "-m", "engine.sglang.plan"]
    help_out = subprocess.run([*run, "--help"], capture_output=True, text=True, cwd=REPO)
    assert help_out.returncode == 0 and "--model-path" in help_out.stdout
    (tmp_path / "config.json").write_text((FIX / "config_8b.json").read_text())
    csv = str(FIX / "nvidia_smi_h100.csv")
    args = ["--model-path", str(tmp_path), "--gpus-csv", csv, "--host-ram-gb", "64"]
    table = subprocess.run([*run, *args], capture_output=True, text=True, cwd=REPO)
    assert table.returncode == 0, table.stderr
    assert "--mem-fraction-static   0.861" in table.stdout
    assert "sglang.launch_server" in table.stdout
