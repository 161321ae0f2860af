"""Small random models for tests that need a model shape SmolLM2 lacks."""

from __future__ import annotations

import torch


def tiny_qwen2(seed: int) -> torch.nn.Module:
    """A 2-layer Qwen2 with random weights in bfloat16 (so exact in bfloat16, as the native
    GEMV requires) and biases on its QKV projections (SmolLM2's have none)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        hidden_size=128, num_attention_heads=2, num_key_value_heads=1, intermediate_size=256,
        num_hidden_layers=2, vocab_size=4096, max_position_embeddings=1024,
    )  # fmt: skip
    model = Qwen2ForCausalLM(config).eval()
    for layer in model.model.layers:
        for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
            torch.nn.init.normal_(proj.bias, std=0.5)
    return model.to(torch.bfloat16)
