"""A fused forward pass for Llama-family models over the slot KV pool.

transformers' generic forward runs three projections for q, k and v, two for the MLP's gate and
up, and about forty small tensor ops per layer. On two CPU cores each op costs tens of
microseconds of dispatch, which is most of a decode step. This runner computes the same
function with one QKV and one gate-up matrix multiply per layer and fewer elementwise ops:
- the QKV (and gate-up) weights are concatenated once, and the model's own ``q_proj``/``k_proj``/
  ``v_proj`` (``gate_proj``/``up_proj``) weights become views of them, so memory is not doubled
  and the stock forward (the fallback, and the reference in tests) still works;
- rotary embeddings come from the model's own rotary module (so rope scaling variants hold);
- RMSNorm computes in float32 like transformers' ``LlamaRMSNorm``;
- attention is ``attention.attend`` over the pool, as on the stock path.

Only models whose layers have exactly the Llama shape are fused (``fusable``); any other model
runs the stock forward.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from engine.embedded.attention import StepPlan, advance, attend, positions
from engine.embedded.attention_f32 import NativeDecodeF32
from engine.embedded.decode_step import NativeDecodeStep, runs_natively
from engine.embedded.gemv import GemvSwitch, NativeGemv
from engine.embedded.gemv_f32 import NativeGemvF32
from engine.embedded.linear import GemvLinear, Linear, make_linear
from engine.embedded.native import AmxDecode, NativeKernels
from engine.embedded.pointwise_f32 import NativePointwiseF32

FUSABLE_TYPES = frozenset({"llama", "mistral", "qwen2"})


def fusable(model: torch.nn.Module) -> bool:
    """True when ``model`` is a Llama-shaped causal LM this runner computes exactly."""
    cfg = model.config
    if getattr(cfg, "model_type", None) not in FUSABLE_TYPES:
        return False
    if getattr(cfg, "hidden_act", "silu") != "silu" or getattr(cfg, "mlp_bias", False):
        return False
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if not layers or getattr(model, "lm_head", None) is None:
        return False
    attn = layers[0].self_attn
    # qwen2 has q/k/v biases (fused too); an o_proj bias or extra norms are not handled
    return attn.o_proj.bias is None and not hasattr(attn, "q_norm")


def _fuse(parts: list[torch.nn.Linear]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Concatenate the weights (and biases) of ``parts`` and rebind each module's parameters to
    views of the result, so the fused matrix is the only copy."""
    weight = torch.cat([p.weight.detach() for p in parts])
    has_bias = [p.bias is not None for p in parts]
    bias = None
    if any(has_bias):
        bias = torch.cat(
            [
                p.bias.detach() if p.bias is not None else weight.new_zeros(p.out_features)
                for p in parts
            ]
        )
    row = 0
    for p in parts:
        rows = p.out_features
        p.weight = torch.nn.Parameter(weight[row : row + rows], requires_grad=False)
        if p.bias is not None:
            p.bias = torch.nn.Parameter(bias[row : row + rows], requires_grad=False)
        row += rows
    return weight, bias


class _Layer:
    def __init__(
        self, layer: torch.nn.Module, pack: bool, gemv: NativeGemv | None, switch: GemvSwitch
    ) -> None:
        attn, mlp = layer.self_attn, layer.mlp
        qkv = _fuse([attn.q_proj, attn.k_proj, attn.v_proj])
        self.qkv = make_linear(*qkv, pack, gemv, switch)
        self.qk_width = attn.q_proj.out_features + attn.k_proj.out_features
        self.o = make_linear(attn.o_proj.weight, None, pack, gemv, switch)
        gate_up = _fuse([mlp.gate_proj, mlp.up_proj])[0]
        self.gate_up = make_linear(gate_up, None, pack, gemv, switch)
        self.down = make_linear(mlp.down_proj.weight, None, pack, gemv, switch)
        self.norm_in = layer.input_layernorm.weight
        self.norm_post = layer.post_attention_layernorm.weight
        self.scale = float(attn.scaling)


def _drop(linear: object) -> int:
    """Free a GEMV linear's oneDNN copy; about its bytes (the weight's: oneDNN's blocked
    tensor does not show its storage), 0 for any other linear."""
    if not isinstance(linear, GemvLinear) or linear.packed is None:
        return 0
    linear.drop_fallback()
    return linear.weight_bytes


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    # one op: torch computes the statistics in float32 for bfloat16 input, as LlamaRMSNorm
    # does; the weight is applied before rounding (LlamaRMSNorm: after), a last-bit difference
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``x`` ``[N, H, D]``; ``cos``/``sin`` ``[N, 1, D]`` (halves repeated, as transformers)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return torch.addcmul(x * cos, rotated, sin)


class FusedLlama:
    """Runs packed steps (see ``attention.py``) for a fusable model. Not thread-safe: the
    scheduler thread is its only user."""

    def __init__(
        self,
        model: torch.nn.Module,
        pack: bool = False,
        kernels: NativeKernels | None = None,
        gemv_f32: NativeGemvF32 | None = None,
        pointwise_f32: NativePointwiseF32 | None = None,
    ) -> None:
        """``pack``: run the linears on prepacked weights (``linear.py``); ``kernels``: run
        residual-add + RMSNorm and SiLU-gate natively (bfloat16 only), and, with ``pack``, the
        linears on the native GEMV (``gemv.py``) where it wins; ``gemv_f32``: with ``pack``,
        a float32 model's linears on the float32 GEMV (``gemv_f32.py``) where it wins;
        ``pointwise_f32``: a float32 model's residual-add + RMSNorm, SiLU-gate and rotary
        embedding natively."""
        inner = model.model
        cfg = model.config
        # the pointwise kernels take bfloat16 rows of whole 16-lane vectors
        fits = cfg.hidden_size % 16 == 0 and cfg.intermediate_size % 16 == 0
        bf16 = model.lm_head.weight.dtype == torch.bfloat16
        self.kernels = kernels if fits and bf16 else None
        f32 = model.lm_head.weight.dtype == torch.float32
        fits_f32 = pointwise_f32 is not None and pointwise_f32.supports(cfg.hidden_size)
        fits_f32 = fits_f32 and cfg.intermediate_size % 8 == 0  # SiLU-gate: whole 8-lane vectors
        self.pointwise_f32 = pointwise_f32 if f32 and fits_f32 else None
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        # the rotary kernel takes each head's halves in whole 16-lane vectors
        self.native_rope = self.kernels is not None and self.head_dim % 32 == 0
        self.rope_f32 = self.pointwise_f32 is not None and self.pointwise_f32.rope_supports(
            self.head_dim
        )
        self.embed = inner.embed_tokens.weight
        self.rotary = inner.rotary_emb
        self.norm = inner.norm.weight
        self.eps = float(getattr(cfg, "rms_norm_eps", 1e-6))
        # the native linear where the weights are prepacked anyway
        self.gemv: NativeGemv | None = None
        if pack and kernels is not None and bf16:
            self.gemv = NativeGemv(kernels.library)
        elif pack and gemv_f32 is not None and self.embed.dtype == torch.float32:
            self.gemv = gemv_f32
        # whether every linear below runs on the GEMV (off where ``calibrate.gemv_wins`` finds
        # oneDNN faster); shared by them all
        self.gemv_switch = GemvSwitch()
        self.lm_head = make_linear(model.lm_head.weight, None, pack, self.gemv, self.gemv_switch)
        self.q_heads = cfg.num_attention_heads
        self.kv_heads = cfg.num_key_value_heads
        self.hidden = cfg.hidden_size
        self.layers = [_Layer(layer, pack, self.gemv, self.gemv_switch) for layer in inner.layers]
        # decode-only steps in one native call where every linear has GEMV panels
        self.native_step: NativeDecodeStep | None = None
        self.decode_rows_on_tiles = False  # ``decode_on_tiles``
        scales = {layer.scale for layer in self.layers}
        heads = (self.q_heads, self.kv_heads, self.head_dim)
        native = self.gemv is not None and len(scales) == 1 and runs_natively(self.layers)
        if (
            native
            and self.native_rope
            and kernels is not None
            and kernels.supports(torch.bfloat16, self.head_dim)
        ):
            self.native_step = NativeDecodeStep(
                str(kernels.library), self.layers, heads, cfg.intermediate_size, self.eps,
                scales.pop(),
            )  # fmt: skip
        elif (
            native
            and isinstance(self.gemv, NativeGemvF32)
            and self.rope_f32
            and NativeDecodeF32.supports(torch.float32, self.head_dim)
            and cfg.hidden_size % 32 == 0
            and cfg.intermediate_size % 32 == 0
        ):
            self.native_step = NativeDecodeStep(
                str(self.gemv.library), self.layers, heads, cfg.intermediate_size, self.eps,
                scales.pop(), torch.float32,
            )  # fmt: skip

    def _add_norm(
        self, h: torch.Tensor, delta: torch.Tensor | None, weight: torch.Tensor
    ) -> torch.Tensor:
        """``h += delta`` in place (the residual), then RMSNorm of ``h``."""
        if self.kernels is not None:
            return self.kernels.add_rms_norm(h, delta, weight, self.eps)
        if self.pointwise_f32 is not None:
            return self.pointwise_f32.add_rms_norm(h, delta, weight, self.eps)
        if delta is not None:
            h.add_(delta)
        return _rms(h, weight, self.eps)

    def _rope(self, qk: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """``qk`` ``[N, heads, D]``, ``cos``/``sin`` ``[N, 1, D]``: natively in place, or anew."""
        if self.native_rope:
            return self.kernels.rope_(qk, cos[:, 0], sin[:, 0])
        if self.rope_f32:
            return self.pointwise_f32.rope_(qk, cos[:, 0], sin[:, 0])
        return _rope(qk, cos, sin)

    def _gate(self, gate_up: torch.Tensor) -> torch.Tensor:
        if self.kernels is not None:
            return self.kernels.silu_mul(gate_up)
        if self.pointwise_f32 is not None:
            return self.pointwise_f32.silu_mul(gate_up)
        gate, up = gate_up.chunk(2, dim=-1)
        return F.silu(gate) * up

    def drop_onednn_copies(self) -> int:
        """Free oneDNN's copies of the weights that also run on the GEMV, once the engine has
        settled on the GEMV (``gemv_switch.on`` for good); returns the bytes freed."""
        freed = 0
        for layer in self.layers:
            for linear in (layer.qkv, layer.o, layer.gate_up, layer.down):
                freed += _drop(linear)
        return freed + _drop(self.lm_head)

    @torch.inference_mode()
    def run_linears(self, rows: int) -> None:
        """Every linear of one step of ``rows`` tokens, on zeros, results dropped: the
        workload ``calibrate.gemv_wins`` times to set ``gemv_switch``."""
        self.run_layer_linears(rows, amx=False)
        self.lm_head(torch.zeros(rows, self.hidden, dtype=self.embed.dtype))

    @torch.inference_mode()
    def run_layer_linears(self, rows: int, amx: bool) -> None:
        """The layers' linears of a decode step of ``rows`` tokens (not the head's), on the
        AMX tiles over the GEMV's panels (``amx``; the native step's) or on the linears as
        they run: what ``calibrate.amx_step_wins`` times."""
        x = torch.zeros(rows, self.hidden, dtype=self.embed.dtype)
        for layer in self.layers:
            if amx:
                assert self.kernels is not None
                run = self.kernels.amx_linear
                qkv = run(x, layer.qkv.panels, layer.qkv.outputs)
                a = qkv[:, : self.q_heads * self.head_dim].contiguous()
                run(a, layer.o.panels, layer.o.outputs)
                gate_up = run(x, layer.gate_up.panels, layer.gate_up.outputs)
                run(self._gate(gate_up), layer.down.panels, layer.down.outputs)
            else:
                layer.o(layer.qkv(x)[:, : self.q_heads * self.head_dim].contiguous())
                layer.down(self._gate(layer.gate_up(x)))

    def decode_on_tiles(self) -> None:
        """Decode rows on the AMX tiles from now on, in every step: decode-only steps in one
        native call there, and in steps that carry prompt rows too, the decode rows' linears
        (the prompt rows' stay on oneDNN), so a decode row is computed alike whatever its
        step holds (its greedy text then does not depend on the requests beside it)."""
        assert self.native_step is not None
        self.native_step.amx = True
        self.decode_rows_on_tiles = True

    def _linear(self, linear: Linear, x: torch.Tensor, n_decode: int) -> torch.Tensor:
        """``linear(x)``; with ``decode_rows_on_tiles``, the first ``n_decode`` rows (the
        step's decode queries) on the AMX tiles over the GEMV's panels, as the native step
        computes them (bias added after rounding, as there)."""
        if not self.decode_rows_on_tiles or n_decode == 0:
            return linear(x)
        assert self.kernels is not None and isinstance(linear, GemvLinear)
        head = self.kernels.amx_linear(x[:n_decode], linear.panels, linear.outputs)
        if linear.bias is not None:
            head.add_(linear.bias)
        if n_decode >= len(x):
            return head
        y = linear(x)  # oneDNN: the weights are read once for the step anyway
        y[:n_decode] = head
        return y

    def amx_step_available(self) -> bool:
        """Whether decode rows could run on the AMX tiles: the native step exists (every
        layer's linear has GEMV panels), the head has them too, and the shapes suit the
        tiles."""
        return (
            self.native_step is not None
            and isinstance(self.lm_head, GemvLinear)
            and self.kernels is not None
            and self.kernels.amx_prefill_supports(self.head_dim)
            and self.hidden % 32 == 0  # the tiles take k in steps of 32
            and self.native_step.intermediate % 32 == 0
        )

    def _decodes_natively(self, plan: StepPlan, keep: list[int]) -> bool:
        """A step of decode queries only, every row's logits kept, on the native kernels:
        the GEMV with the AVX-512 decode attention, or the AMX tiles for both (the native
        step's ``amx``, set where decode attention runs on them too); in float32, the AVX2
        GEMV with the AVX2 decode attention."""
        if self.native_step is None or plan.segments or keep != list(range(plan.n_decode)):
            return False
        if self.native_step.dtype == torch.float32:  # the AVX2 step, with its decode attention
            return self.gemv_switch.on and isinstance(plan.decoder, NativeDecodeF32)
        if plan.kernel is None:
            return False
        if self.native_step.amx:
            return isinstance(plan.decoder, AmxDecode)
        return self.gemv_switch.on and plan.decoder is plan.kernel

    @torch.inference_mode()
    def step(self, tokens: list[int], plan: StepPlan, keep: list[int]) -> torch.Tensor:
        """One packed forward; returns logits ``[len(keep), vocab]`` for the token indices
        ``keep``, and advances the pool rows it wrote."""
        n, d = len(tokens), self.head_dim
        h = F.embedding(torch.tensor(tokens), self.embed)  # [N, hidden], a fresh tensor
        cos, sin = self.rotary(h, positions(plan))  # [1, N, D]
        if self._decodes_natively(plan, keep):
            assert self.native_step is not None
            h = self._add_norm(h, self.native_step(h, cos[0], sin[0], plan), self.norm)
            advance(plan)
            return self._linear(self.lm_head, h, len(h))
        cos, sin = cos[0].unsqueeze(1), sin[0].unsqueeze(1)
        n_decode = plan.n_decode  # the step's first rows: decode queries (kept in every layer)
        pending = None  # the last MLP's output, added to h by the next norm
        last = len(self.layers) - 1
        # the last layer's rows feed nothing but logits: past its KV, only kept rows are
        # computed (a prompt chunk's rows but its last are dead there; decode rows all live)
        prune = len(keep) < n
        for index, layer in enumerate(self.layers):
            x = self._add_norm(h, pending, layer.norm_in)
            qkv = self._linear(layer.qkv, x, n_decode)
            # q and k heads are adjacent in each row: one rotary pass over both
            qk = self._rope(qkv[:, : layer.qk_width].view(n, -1, d), cos, sin)
            q, k = qk[:, : self.q_heads], qk[:, self.q_heads :]
            v = qkv[:, layer.qk_width :].view(n, self.kv_heads, d)
            need = keep if prune and index == last else None
            out = attend(
                plan,
                index,
                q.transpose(0, 1).unsqueeze(0),
                k.transpose(0, 1).unsqueeze(0),
                v.transpose(0, 1).unsqueeze(0),
                layer.scale,
                need,
            )  # [1, N, Hq, D], or [1, len(keep), Hq, D]
            if need is not None:  # (the previous MLP's output is in h already)
                h = h[keep]
            rows = len(h)
            attended = self._linear(layer.o, out.view(rows, self.q_heads * d), n_decode)
            x = self._add_norm(h, attended, layer.norm_post)
            gated = self._gate(self._linear(layer.gate_up, x, n_decode))
            pending = self._linear(layer.down, gated, n_decode)
        if not prune:
            h, pending = h[keep], pending[keep]
        h = self._add_norm(h, pending, self.norm)
        advance(plan)
        return self._linear(self.lm_head, h, n_decode)
