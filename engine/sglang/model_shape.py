"""The shape of a Hugging Face decoder model, from its ``config.json``: what sizing needs.

KV bytes per token = 2 (K and V) x layers x kv_heads x head_dim x dtype bytes.
Weights bytes = parameter count x dtype bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DTYPE_BYTES: Mapping[str, int] = {
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "float32": 4,
    "fp32": 4,
    "float": 4,
    "fp8": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}


@dataclass(frozen=True)
class ModelShape:
    """What launch tuning needs to know about a model."""

    name: str
    num_layers: int
    num_kv_heads: int
    head_dim: int
    dtype_bytes: int
    param_count: int
    max_position_embeddings: int

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * self.dtype_bytes

    @property
    def weights_bytes(self) -> int:
        return self.param_count * self.dtype_bytes


def dtype_bytes_of(config: Mapping[str, Any]) -> int:
    """Bytes per weight: an fp8 ``quantization_config`` wins, then ``torch_dtype``/``dtype``."""
    quant = config.get("quantization_config") or {}
    if str(quant.get("quant_method", "")).lower() == "fp8":
        return 1
    raw = config.get("torch_dtype") or config.get("dtype") or "bfloat16"
    key = str(raw).lower().removeprefix("torch.")
    if key not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {raw!r} in config.json")
    return DTYPE_BYTES[key]


def estimate_params(config: Mapping[str, Any]) -> int:
    """Parameter count of a Llama/Qwen-style decoder from its dimensions.

    Per layer: q and o projections (2 x hidden x heads x head_dim), k and v projections
    (2 x hidden x kv_heads x head_dim), a gated MLP (3 x hidden x intermediate), two norms.
    Plus the token embedding, the LM head unless tied, and the final norm.
    """
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    inter = int(config["intermediate_size"])
    vocab = int(config["vocab_size"])
    layers = int(config["num_hidden_layers"])
    attn = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    per_layer = attn + 3 * hidden * inter + 2 * hidden
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings") else 2)
    return layers * per_layer + embeddings + hidden


def shape_from_config(
    config: Mapping[str, Any], name: str = "model", param_count: int | None = None
) -> ModelShape:
    """Build a ``ModelShape``; ``param_count`` overrides the estimate (MoE, odd layouts)."""
    text_config = config.get("text_config")
    if isinstance(text_config, Mapping) and "num_hidden_layers" not in config:
        config = {**config, **text_config}
    heads = int(config["num_attention_heads"])
    head_dim = config.get("head_dim") or int(config["hidden_size"]) // heads
    return ModelShape(
        name=name,
        num_layers=int(config["num_hidden_layers"]),
        num_kv_heads=int(config.get("num_key_value_heads") or heads),
        head_dim=int(head_dim),
        dtype_bytes=dtype_bytes_of(config),
        param_count=param_count if param_count is not None else estimate_params(config),
        max_position_embeddings=int(config.get("max_position_embeddings") or 4096),
    )


def load_shape(model_dir: Path, param_count: int | None = None) -> ModelShape:
    """Read ``model_dir/config.json`` (thin I/O edge over ``shape_from_config``)."""
    config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    return shape_from_config(config, name=Path(model_dir).name, param_count=param_count)
