"""Capacity planner: a GPU type and count, a model and a target context length in; the
maximum concurrent sessions and the tuned SGLang launch out, from ``engine.sglang.tuning``
(the same module the ``python -m engine.sglang.plan`` CLI uses)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.sglang.gpu_info import GIB, PROFILES, GpuInfo, read_gpus
from engine.sglang.model_shape import ModelShape, load_shape, shape_from_config
from engine.sglang.plan import CAPACITY_CONTEXTS, host_ram_gb
from engine.sglang.tuning import DoesNotFit, SiteNeeds, tune

# memory.total as nvidia-smi reports it (MiB) for each known card class
GPU_MIB = {"h200": 143771, "h100": 81559, "a100-80g": 81920, "l40s": 46068}
THIS_BOX = "this box (nvidia-smi)"

# config.json essentials of common instruct models (bf16), for boxes without the files
_LLAMA3 = {"vocab_size": 128256, "max_position_embeddings": 131072, "head_dim": 128}
_QWEN25 = {"vocab_size": 152064, "max_position_embeddings": 32768}
MODEL_PRESETS: dict[str, dict] = {
    "Llama-3.1-8B-Instruct": {
        **_LLAMA3,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
    },
    "Llama-3.3-70B-Instruct": {
        **_LLAMA3,
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
    },
    "Qwen2.5-7B-Instruct": {
        **_QWEN25,
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
    },
    "Qwen2.5-32B-Instruct": {
        **_QWEN25,
        "hidden_size": 5120,
        "intermediate_size": 27648,
        "num_hidden_layers": 64,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
    },
}


class PlanError(ValueError):
    """Bad planner input, or a model that does not fit; the message says which."""


@dataclass(frozen=True)
class CapacityPlan:
    gpu: str
    model: str
    context_length: int
    max_sessions: int  # sessions that each hold a full ``context_length`` in the KV pool
    max_running_requests: int
    kv_capacity_tokens: int
    tp: int
    workers: int  # SGLang workers of ``tp`` GPUs each, behind the gateway when more than one
    mem_fraction_static: float
    weights_gib: float
    command: str  # one line per worker
    capacity_table: tuple[tuple[int, int], ...]  # (context, sessions)
    warnings: tuple[str, ...]


def gpu_choices(has_local: bool) -> list[str]:
    """Known card classes (``key — label``), plus this box's GPUs when nvidia-smi sees any."""
    names = [f"{p.key} — {p.label}" for p in PROFILES]
    return [THIS_BOX, *names] if has_local else names


def gpus_for(choice: str, count: int) -> list[GpuInfo]:
    if choice == THIS_BOX:
        gpus = read_gpus()
        if not gpus:
            raise PlanError("nvidia-smi finds no GPU on this box; choose a GPU type")
        return gpus
    key = choice.split(" — ", 1)[0]
    profile = next((p for p in PROFILES if p.key == key), None)
    if profile is None:
        raise PlanError(f"unknown GPU {choice!r}")
    if not 1 <= int(count) <= 16:
        raise PlanError("GPU count must be between 1 and 16")
    return [GpuInfo(i, f"NVIDIA {profile.label}", GPU_MIB[key], 0, "") for i in range(count)]


def model_shape(choice: str, model_dir: str = "") -> ModelShape:
    """A preset by name, or the ``config.json`` of a local model directory."""
    if model_dir.strip():
        path = Path(model_dir.strip())
        if not (path / "config.json").is_file():
            raise PlanError(f"no config.json in {path}")
        try:
            return load_shape(path)
        except (KeyError, ValueError) as exc:
            raise PlanError(f"{path}/config.json: {exc}") from exc
    if choice not in MODEL_PRESETS:
        raise PlanError(f"unknown model {choice!r}; give a model directory instead")
    return shape_from_config({**MODEL_PRESETS[choice], "torch_dtype": "bfloat16"}, name=choice)


def plan_capacity(
    gpu: str,
    gpu_count: int,
    model: str,
    context_length: int,
    model_dir: str = "",
    concurrency: int = 32,
) -> CapacityPlan:
    """Tune the launch for the chosen box and model at ``context_length``."""
    if not 512 <= int(context_length) <= 1_048_576:
        raise PlanError("context length must be between 512 and 1,048,576 tokens")
    gpus = gpus_for(gpu, int(gpu_count))
    shape = model_shape(model, model_dir)
    context = int(context_length)
    site = SiteNeeds(context, max(1, int(concurrency)), host_ram_gb(), min(4096, context))
    path = model_dir.strip() or f"/models/{shape.name}"
    try:
        plan = tune(gpus, shape, site, model_path=path)
    except DoesNotFit as exc:
        raise PlanError(f"does not fit: {exc}") from exc
    one = plan.first
    return CapacityPlan(
        gpu=gpus[0].name if gpu == THIS_BOX else gpu,
        model=shape.name,
        context_length=one.context_length,
        max_sessions=plan.capacity(one.context_length),
        max_running_requests=plan.max_running_requests,
        kv_capacity_tokens=plan.kv_capacity_tokens,
        tp=one.tp,
        workers=len(plan.workers),
        mem_fraction_static=one.mem_fraction_static,
        weights_gib=round(one.weights_bytes / GIB, 1),
        command="\n".join(plan.commands()),
        capacity_table=tuple(
            (c, plan.capacity(c)) for c in CAPACITY_CONTEXTS if c <= one.context_length
        ),
        warnings=plan.warnings,
    )
