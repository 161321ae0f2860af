"""The embedded CPU engine: one scheduler thread runs a Hugging Face causal LM on the CPU,
reusing prompt-prefix KV from a radix cache across requests.

Requests wait in a bounded queue; when several wait, the one with the longest cached prefix
goes first (SGLang's ``lpm`` policy). Closing a request's stream cancels it at the next step.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from engine.base import (
    EngineBusy,
    EngineError,
    EngineInfo,
    Finished,
    GenerateRequest,
    GenerationStats,
    PromptTooLong,
    SamplingParams,
    StreamItem,
    TextDelta,
)
from engine.embedded.radix_cache import RadixKVCache, match_length
from engine.embedded.sampling import make_generator, sample_next
from engine.embedded.textstream import TextStream

log = logging.getLogger(__name__)

PREFILL_CHUNK = 512  # tokens per prefill step; cancellation is checked between steps


@dataclass
class _Job:
    rid: str
    ids: list[int]
    sampling: SamplingParams
    out: queue.Queue = field(default_factory=queue.Queue)
    cancelled: threading.Event = field(default_factory=threading.Event)
    enqueued_at: float = field(default_factory=time.perf_counter)


def pick_dtype(name: str) -> torch.dtype:
    if name == "bfloat16":
        return torch.bfloat16
    if name == "float32":
        return torch.float32
    # auto: bf16 where the CPU has native-width vector units for it, else fp32
    capability = torch.backends.cpu.get_cpu_capability()
    return torch.bfloat16 if "AVX512" in capability else torch.float32


class EmbeddedEngine:
    """Implements ``engine.base.Engine`` in-process."""

    def __init__(
        self,
        model_dir: Path,
        *,
        dtype: str = "auto",
        kv_budget_tokens: int = 32768,
        max_queue: int = 16,
        threads: int = 0,
        profile: str = "cpu",
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads:
            torch.set_num_threads(threads)
        self.model_dir = Path(model_dir)
        self.profile = profile
        self.max_queue = max_queue
        self._dtype = pick_dtype(dtype)
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=self._dtype)
        self.model.eval()
        self.context_length = int(getattr(self.model.config, "max_position_embeddings", 2048))
        self._eos = self._eos_ids()
        self._cache = RadixKVCache(kv_budget_tokens)
        self._pending: deque[_Job] = deque()
        self._cv = threading.Condition()
        self._running = 0
        self._closed = False
        self._flush = False  # set by flush_cache(); the scheduler thread clears the cache
        self._counters = dict.fromkeys(
            (
                "prompt_tokens_total",
                "cached_tokens_total",
                "generation_tokens_total",
                "num_requests_total",
                "num_aborted_requests_total",
            ),
            0.0,
        )
        self._worker = threading.Thread(target=self._loop, name="embedded-engine", daemon=True)
        self._worker.start()

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
        if request.prompt is not None:
            prompt = request.prompt
        elif request.messages:
            prompt = self.render_chat(request.messages)
        else:
            raise EngineError("empty request: give a prompt or messages")
        ids = self.encode(prompt)
        if not ids:
            raise EngineError("empty prompt")
        if len(ids) >= self.context_length:
            raise PromptTooLong(
                f"prompt is {len(ids)} tokens; the model's context window is "
                f"{self.context_length} tokens"
            )
        job = _Job(rid=request.request_id or uuid.uuid4().hex, ids=ids, sampling=request.sampling)
        with self._cv:
            if self._closed:
                raise EngineError("engine is shut down")
            if len(self._pending) >= self.max_queue:
                raise EngineBusy(f"engine busy: {len(self._pending)} requests already waiting")
            self._pending.append(job)
            self._cv.notify()
        return self._stream(job)

    def health(self) -> bool:
        return self._worker.is_alive() and not self._closed

    def info(self) -> EngineInfo:
        return EngineInfo(
            backend="embedded",
            model=self.model_dir.name,
            context_length=self.context_length,
            profile=self.profile,
            dtype=str(self._dtype).removeprefix("torch."),
        )

    def metrics(self) -> dict[str, float]:
        with self._cv:
            out = dict(self._counters)
            out["num_running_reqs"] = float(self._running)
            out["num_queue_reqs"] = float(len(self._pending))
        out["num_used_tokens"] = float(self._cache.total_tokens)
        out["max_total_num_tokens"] = float(self._cache.budget_tokens)
        prompt = out["prompt_tokens_total"]
        out["cache_hit_rate"] = out["cached_tokens_total"] / prompt if prompt else 0.0
        return out

    def flush_cache(self) -> None:
        with self._cv:
            self._flush = True
            self._cv.notify()

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify()
        self._worker.join(timeout=30)

    # ---- internals ------------------------------------------------------------------------

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

    def _stream(self, job: _Job) -> Iterator[StreamItem]:
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

    def _next_job(self) -> _Job | None:
        with self._cv:
            while not self._pending and not self._closed and not self._flush:
                self._cv.wait()
            if self._flush:
                self._cache.clear()
                self._flush = False
            if self._closed or not self._pending:
                return None
            # longest cached prefix first; FIFO among equals (max() keeps the first maximum)
            job = max(self._pending, key=lambda j: match_length(self._cache, j.ids[:-1]))
            self._pending.remove(job)
            self._running += 1
            return job

    def _loop(self) -> None:
        while True:
            job = self._next_job()
            if job is None:
                if self._closed:
                    return
                continue
            try:
                self._run(job)
            except Exception as exc:  # keep serving other requests
                log.exception("request %s failed", job.rid)
                job.out.put(EngineError(f"generation failed: {exc}"))
            finally:
                with self._cv:
                    self._running -= 1

    @torch.inference_mode()
    def _run(self, job: _Job) -> None:
        from transformers import DynamicCache

        start = time.perf_counter()
        ids, sp = job.ids, job.sampling
        # keep at least one prompt token to run, so there are logits to sample from
        cached, kv = self._cache.match(ids[:-1])
        cache = DynamicCache(ddp_cache_data=kv or None, config=self.model.config)
        fed: list[int] = list(ids[:cached])  # tokens whose KV is in ``cache``
        stream = TextStream(decode=self._decode, stops=sp.stop)
        finish, ttft, completion = "abort", 0.0, 0
        logits = None
        for pos in range(cached, len(ids), PREFILL_CHUNK):
            if job.cancelled.is_set():
                break
            piece = ids[pos : pos + PREFILL_CHUNK]
            logits = self._forward(piece, cache)
            fed.extend(piece)
        else:
            budget = min(sp.max_new_tokens, self.context_length - len(ids))
            generator = make_generator(sp.seed)
            finish = "length"
            while completion < budget:
                token = sample_next(logits, sp.temperature, sp.top_p, generator)
                completion += 1
                if completion == 1:
                    ttft = time.perf_counter() - start
                if token in self._eos and not sp.ignore_eos:
                    finish = "stop"
                    break
                delta = stream.push(token)
                if delta:
                    job.out.put(TextDelta(delta))
                if stream.stopped:
                    finish = "stop"
                    break
                if completion >= budget:
                    break
                if job.cancelled.is_set():
                    finish = "abort"
                    break
                logits = self._forward([token], cache)
                fed.append(token)
            tail = stream.flush()
            if tail and finish != "abort":
                job.out.put(TextDelta(tail))
        # the prefix cache keeps what was computed, also for aborted requests; the request's
        # own cache object is dropped here, which frees its KV
        if fed:
            self._cache.insert(fed, [(layer.keys, layer.values) for layer in cache.layers])
        del cache
        stats = GenerationStats(
            prompt_tokens=len(ids),
            cached_tokens=cached,
            completion_tokens=completion,
            ttft_s=ttft,
            e2e_s=time.perf_counter() - start,
            finish_reason=finish,  # type: ignore[arg-type]
            queue_s=start - job.enqueued_at,
        )
        with self._cv:
            c = self._counters
            c["prompt_tokens_total"] += len(ids)
            c["cached_tokens_total"] += cached
            c["generation_tokens_total"] += completion
            c["num_requests_total"] += 1
            if finish == "abort":
                c["num_aborted_requests_total"] += 1
        job.out.put(Finished(stats))

    def _forward(self, ids: list[int], cache) -> torch.Tensor:  # noqa: ANN001
        out = self.model(
            input_ids=torch.tensor([ids]), cache=cache, use_cache=True, logits_to_keep=1
        )
        return out.logits[0, -1]

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)
