"""The embedded CPU engine: a Hugging Face causal LM served in-process by a continuous-batching
scheduler with a token-level radix cache of prompt-prefix KV (see ``scheduler.py``)."""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import torch

from engine.base import (
    EngineInfo,
    Finished,
    GenerateRequest,
    InvalidRequest,
    LogprobOptions,
    PromptTooLong,
    StreamItem,
    logprob_problem,
    sampling_problem,
)
from engine.embedded.attention import install as install_pool_attention
from engine.embedded.attention import run_step
from engine.embedded.attention_f32 import NativeDecodeF32, NativePrefillF32
from engine.embedded.attention_routes import NATIVE_PREFILL
from engine.embedded.calibrate import decode_on_amx, prefill_route
from engine.embedded.cbuild import cpu_flags
from engine.embedded.draft_budget import DraftBudget
from engine.embedded.draft_pool import DraftPool
from engine.embedded.fused import FusedLlama, fusable
from engine.embedded.gemv_f32 import load_gemv_f32
from engine.embedded.heap import keep_freed_memory
from engine.embedded.kv_pool import KVPool, reserved_positions
from engine.embedded.linear import packing_available, packing_helps_drafts
from engine.embedded.native import AmxDecode, load_native_kernels
from engine.embedded.omp import run_in_own_thread
from engine.embedded.pointwise_f32 import NativePointwiseF32
from engine.embedded.prefill_chunk import prefill_chunk
from engine.embedded.routing import attention_words, settle_linears
from engine.embedded.scheduler import PREFILL_CHUNK, Scheduler
from engine.embedded.sequence import Job
from engine.embedded.speculative import DEFAULT as DEFAULT_SPECULATIVE
from engine.embedded.speculative import SpeculativeConfig, speculation_gauges
from engine.token_bytes import TokenDecoder

log = logging.getLogger(__name__)


def pick_dtype(
    name: str, flags: frozenset[str] | None = None, capability: str | None = None
) -> torch.dtype:
    """``bfloat16``, ``float32``, or ``auto``: bfloat16 only where the CPU computes it natively
    (AVX-512 BF16 dot products, and PyTorch running at AVX-512), else float32. Without native
    bf16 math every bf16 matrix multiply converts to fp32 first: measured on an AVX-512 Xeon
    without it, a 1,206-token prefill took 5.2 s in bf16 against 2.0 s in fp32 (decode: 25 vs
    22 tokens/s for one stream), and RAG turns are mostly prefill. ``flags`` (the CPU's, as
    /proc/cpuinfo spells them) and ``capability`` (PyTorch's) default to this machine's."""
    if name == "bfloat16":
        return torch.bfloat16
    if name == "float32":
        return torch.float32
    flags = cpu_flags() if flags is None else flags
    capability = torch.backends.cpu.get_cpu_capability() if capability is None else capability
    native = "avx512_bf16" in flags and "AVX512" in capability
    return torch.bfloat16 if native else torch.float32


class EmbeddedEngine:
    """Implements ``engine.base.Engine`` in-process."""

    supports_json_schema = True  # and regex, ebnf

    def __init__(
        self,
        model_dir: Path,
        *,
        dtype: str = "auto",
        kv_budget_tokens: int = 32768,
        max_queue: int = 16,
        max_running: int = 8,
        threads: int = 0,
        profile: str = "cpu",
        fused: bool = True,
        native_attention: bool = True,
        kernel_dir: Path | None = None,
        packed_weights: bool = True,
        speculative: SpeculativeConfig | None = None,
        calibrate: bool = True,
    ) -> None:
        """``speculative``: prompt-lookup speculative decoding (``speculative.py``); None: the
        default, on (it wins on every workload of ``appliance bench engine --speculative``;
        see ``speculative.DEFAULT``). ``calibrate``: time the native kernels against
        PyTorch's on this CPU and route prefill attention and small linears to the faster
        (``calibrate.py``); off, the native kernels take all they can."""
        if threads:
            torch.set_num_threads(threads)
        # each step's activations stay mapped between steps (heap.py: cold prefill ~0.1-0.3 s)
        keep_freed_memory()
        self.model_dir = Path(model_dir)
        self.profile = profile
        self.max_queue = max_queue
        self.speculative = speculative if speculative is not None else DEFAULT_SPECULATIVE
        # answers to draft from across requests, sized once (``draft_pool.py``)
        self.draft_pool = DraftPool(
            self.speculative.pool_tokens if self.speculative.enabled else 0,
            self.speculative.draft.max_ngram + 1,  # see ``ngram_draft.POOL_MIN_NGRAM``
        )
        # loading runs OpenMP regions: off the calling thread, whose team would outlive it
        run_in_own_thread(
            lambda: self._load(
                dtype, kv_budget_tokens, max_running, fused, native_attention, kernel_dir,
                packed_weights, calibrate,
            )
        )  # fmt: skip
        self._scheduler.thread.start()

    def _load(
        self,
        dtype: str,
        kv_budget_tokens: int,
        max_running: int,
        fused: bool,
        native_attention: bool,
        kernel_dir: Path | None,
        packed_weights: bool,
        calibrate: bool,
    ) -> None:
        """Model, runner, kernels, KV pool and scheduler (not started)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self._dtype = pick_dtype(dtype)
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.model_dir))
        self.model = AutoModelForCausalLM.from_pretrained(str(self.model_dir), dtype=self._dtype)
        self.model.eval()
        self.context_length = int(getattr(self.model.config, "max_position_embeddings", 2048))
        self._eos = frozenset(self._eos_ids())
        self._grammar = None  # compiled lazily, on the first request with a constraint
        self._tokens = TokenDecoder(self.tokenizer)
        install_pool_attention(self.model)
        # the fused runner where the model has the Llama shape; transformers' forward otherwise
        self.runner = "fused" if fused and fusable(self.model) else "transformers"
        # what a step reads the linears' weights in (bfloat16 panels on the float32 GEMV)
        self.linear_dtype = self._dtype
        cfg = self.model.config
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        kernel = load_native_kernels(kernel_dir) if native_attention else None
        if kernel is not None and not kernel.supports(self._dtype, head_dim):
            kernel = None
        # float32 (a CPU without AVX-512 BF16): the AVX2 library's decode and prefill attention,
        # and the fused runner's linears on bfloat16 panels where they run faster (``gemv_f32.py``)
        gemv_f32, decoder, prefiller = None, None, None
        if native_attention and kernel is None and self._dtype == torch.float32:
            gemv_f32 = load_gemv_f32(kernel_dir)
        if gemv_f32 is not None and NativeDecodeF32.supports(self._dtype, head_dim):
            decoder = NativeDecodeF32(gemv_f32.library)
        if gemv_f32 is not None and NativePrefillF32.supports(self._dtype, head_dim):
            prefiller = NativePrefillF32(gemv_f32.library)
        named = kernel if kernel is not None else decoder
        self.attention = named.name if named is not None else "pytorch"
        packable = packing_available(self._dtype) or (
            (self.speculative.enabled or gemv_f32 is not None) and packing_helps_drafts(self._dtype)
        )
        packed = packed_weights and self.runner == "fused" and packable
        weights = ", prepacked weights" if packed else ""
        route = NATIVE_PREFILL
        heads = (cfg.num_attention_heads, cfg.num_key_value_heads)
        if kernel is not None and calibrate:
            route = prefill_route(kernel, *heads, head_dim)
            if decode_on_amx(kernel, *heads, head_dim):
                decoder = AmxDecode(kernel)  # every decode query, every step (it rounds apart)
        elif prefiller is not None and calibrate:
            route = prefill_route(prefiller, *heads, head_dim, self._dtype)
        budget, costs = None, None
        if self.runner == "fused":
            pointwise = NativePointwiseF32(gemv_f32.library) if gemv_f32 is not None else None
            runner = FusedLlama(self.model, packed, kernel, gemv_f32, pointwise)
            forward = runner.step
            if runner.gemv is not None:
                shapes = (cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers)
                shapes += (cfg.vocab_size, cfg.num_attention_heads, cfg.num_key_value_heads)
                shapes += (str(self._dtype), packed)
                words, costs = settle_linears(runner, shapes, decoder, calibrate)
                weights += words
                if runner.gemv_switch.on:
                    self.linear_dtype = torch.bfloat16  # the GEMV's panels
                # the drafts a step is worth, from those costs
                budget = DraftBudget(costs) if costs is not None else None
        else:
            forward = functools.partial(run_step, self.model)
        native = attention_words(kernel, decoder, route, prefiller)
        spec = ", n-gram speculation" if self.speculative.enabled else ""
        spec += " (drafts as a step's cost allows)" if spec and budget is not None else ""
        # the prompt tokens a step carries while others decode, from the linears' timings
        chunk = prefill_chunk(costs)
        chunking = f", prompts in steps of {chunk} tokens" if chunk != PREFILL_CHUNK else ""
        self.runtime = f"{self.runner} runner{weights}, {native}{spec}{chunking}"
        log.info("embedded engine: %s, %s", self.runtime, self._dtype)
        pool = KVPool(
            layers=cfg.num_hidden_layers,
            slots=max_running,
            kv_heads=cfg.num_key_value_heads,
            head_dim=head_dim,
            dtype=self._dtype,
        )
        if kernel is not None or decoder is not None:
            # rows sized up front for an even share of the KV budget: growing them when the first
            # long prompt arrives stalls every running request (0.52 s for 8 rows of 1,792
            # positions on 2 cores). Only with a native decode kernel, which reads each row up to
            # its length; PyTorch's attention masks whole rows, so it keeps them short
            pool.ensure(reserved_positions(self.context_length, kv_budget_tokens, max_running))
        self._scheduler = Scheduler(
            forward,
            self._decode,
            self._eos,
            self.context_length,
            kv_budget_tokens,
            max_running,
            self.max_queue,
            pool,
            kernel,
            self.speculative,
            route,
            decoder,
            budget,
            self._pool_for(self.speculative),
            chunk,
            prefiller,
        )

    def _pool_for(self, config: SpeculativeConfig) -> DraftPool | None:
        """The answer pool requests under ``config`` draft from: None where the config or the
        engine's start-up size (0: speculation was off) leaves it out."""
        return self.draft_pool if config.pool_tokens and self.draft_pool.enabled else None

    # ---- contract -------------------------------------------------------------------------

    def render_chat(self, messages: tuple[tuple[str, str], ...]) -> str:
        return self.tokenizer.apply_chat_template(
            [{"role": r, "content": c} for r, c in messages],
            tokenize=False,
            add_generation_prompt=True,
        )

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False).input_ids)

    def count_tokens(self, text: str) -> int:
        return len(self.encode(text))

    def generate(self, request: GenerateRequest) -> Iterator[StreamItem]:
        problem = sampling_problem(request.sampling)
        if problem:
            raise InvalidRequest(problem)
        ids = self._request_ids(request)
        if len(ids) >= self.context_length:
            raise PromptTooLong(
                f"prompt is {len(ids)} tokens; the model's context window is "
                f"{self.context_length} tokens"
            )
        job = Job(
            rid=request.request_id or uuid.uuid4().hex,
            ids=ids,
            sampling=request.sampling,
            constraint=self._constraint(request.constraint()),
            logprobs=self._logprob_options(request, len(ids)),
        )
        self._scheduler.submit(job)
        return self._stream(job)

    def abort(self, request_id: str) -> bool:
        return self._scheduler.abort(request_id)

    def health(self) -> bool:
        return self._scheduler.thread.is_alive() and not self._scheduler.closed

    def info(self) -> EngineInfo:
        return EngineInfo(
            backend="embedded",
            model=self.model_dir.name,
            context_length=self.context_length,
            profile=self.profile,
            dtype=str(self._dtype).removeprefix("torch."),
            cache_page_tokens=1,  # the radix cache matches token by token
            runtime=self.runtime,
            max_requests=self._scheduler.max_running + self.max_queue,
        )

    def metrics(self) -> dict[str, float]:
        out = self._scheduler.snapshot()
        prompt = out["prompt_tokens_total"]
        out["cache_hit_rate"] = out["cached_tokens_total"] / prompt if prompt else 0.0
        out.update(speculation_gauges(out))
        return out

    def set_speculative(self, config: SpeculativeConfig) -> None:
        """Use ``config`` for requests admitted from now on; running requests keep their
        drafters, and draft only while the new config is on. The weights stay as they were
        loaded (float32 is prepacked only when the engine started with speculation on), and so
        does the answer pool's size: a config with ``pool_tokens`` 0 drafts without it."""
        self.speculative = config
        self._scheduler.draft_pool = self._pool_for(config)
        self._scheduler.speculative = config  # one reference, read by the scheduler's thread

    def flush_cache(self) -> None:
        """Drop every cached prefix (done by the scheduler once no request is running)."""
        self._scheduler.request_flush()

    def close(self) -> None:
        self._scheduler.stop()

    # ---- internals ------------------------------------------------------------------------

    def _request_ids(self, request: GenerateRequest) -> list[int]:
        given = [x is not None for x in (request.prompt, request.messages, request.input_ids)]
        if sum(given) != 1:
            raise InvalidRequest("give exactly one of prompt, messages or input_ids")
        if request.input_ids is not None:
            ids = list(request.input_ids)
            vocab = int(self.model.config.vocab_size)
            if any(not 0 <= i < vocab for i in ids):
                raise InvalidRequest(f"input_ids must be token ids in [0, {vocab})")
        elif request.messages is not None:
            ids = self.encode(self.render_chat(request.messages)) if request.messages else []
        else:
            ids = self.encode(request.prompt or "")
        if not ids:
            raise InvalidRequest("the prompt is empty")
        return ids

    def _constraint(self, spec: tuple[str, str] | None):  # noqa: ANN202
        if spec is None:
            return None
        from engine.embedded.grammar import GrammarCompiler, GrammarConstraint

        if self._grammar is None:
            self._grammar = GrammarCompiler(
                self.tokenizer,
                int(self.model.config.vocab_size),
                stop_token_ids=sorted(self._eos),
            )
        return GrammarConstraint(self._grammar.compile(*spec))

    def _logprob_options(self, request: GenerateRequest, prompt_len: int) -> LogprobOptions | None:
        """The request's logprob options, checked against the prompt and the vocabulary."""
        options = request.logprobs
        if options is None:
            return None
        problem = logprob_problem(
            options,
            prompt_len,
            int(self.model.config.vocab_size),
            min(request.sampling.max_new_tokens, self.context_length - prompt_len),
        )
        if problem:
            raise InvalidRequest(problem)
        return options

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        gen = getattr(self.model, "generation_config", None)
        eos = getattr(gen, "eos_token_id", None)
        if isinstance(eos, int):
            ids.add(eos)
        elif eos:
            ids.update(eos)
        if self.tokenizer.eos_token_id is not None:
            ids.add(self.tokenizer.eos_token_id)
        return ids

    def _stream(self, job: Job) -> Iterator[StreamItem]:
        try:
            while True:
                item = job.out.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if isinstance(item, Finished):
                    return
        finally:
            job.cancelled.set()  # no-op after Finished; aborts the job if the reader left

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def token_texts(self, ids: list[int]) -> list[str]:
        return self._tokens.texts(ids)

    def token_bytes(self, ids: list[int]) -> list[bytes]:
        return self._tokens.bytes(ids)
