"""The embedded engine's scheduler: continuous batching over one CPU model.

One thread owns the model and the radix cache. Each loop turn it
1. admits waiting requests while fewer than ``max_running`` run, longest cached prefix first
   (SGLang's ``lpm`` policy), restoring each one's cached prefix from the radix cache;
2. runs one prefill chunk of the oldest admitted request still prefilling;
3. runs one batched decode step over every request that is decoding.
Interleaving 2 and 3 keeps running streams flowing while a long prompt is prefilled. A request
that ends (stop, length, cancel) leaves the batch at once and its KV goes into the radix cache.
"""

from __future__ import annotations

import logging
import threading
from collections import deque

import torch

from engine.base import EngineBusy, EngineError, Finished, InvalidRequest
from engine.embedded.batch import PaddedBatch
from engine.embedded.radix_cache import RadixKVCache, common_prefix_len, match_length
from engine.embedded.sequence import Job, Sequence
from engine.embedded.textstream import TextStream

log = logging.getLogger(__name__)

PREFILL_CHUNK = 512  # prompt tokens per prefill step
# a waiting request that shares more than this many uncached tokens with a request still being
# prefilled waits for that prefill to land in the radix cache, instead of computing it twice
DEFER_SHARED_TOKENS = 32

COUNTERS = (
    "prompt_tokens_total",
    "cached_tokens_total",
    "generation_tokens_total",
    "num_requests_total",
    "num_aborted_requests_total",
)


class Scheduler:
    def __init__(
        self,
        model,  # noqa: ANN001 - a transformers causal LM
        decode,  # noqa: ANN001 - token ids -> text
        eos: frozenset[int],
        context_length: int,
        kv_budget_tokens: int,
        max_running: int,
        max_queue: int,
    ) -> None:
        self.model = model
        self.decode = decode
        self.eos = eos
        self.context_length = context_length
        self.max_running = max_running
        self.max_queue = max_queue
        self.cache = RadixKVCache(kv_budget_tokens)
        self.cv = threading.Condition()
        self.pending: deque[Job] = deque()
        self.jobs: dict[str, Job] = {}  # waiting and running, by request id
        self.active: list[Sequence] = []  # admitted: prefilling or decoding
        self.batch = PaddedBatch()
        self.decoding: list[Sequence] = []  # rows of ``batch``, in order
        self.counters = dict.fromkeys(COUNTERS, 0.0)
        self.closed = False
        self.flush_requested = False
        self.thread = threading.Thread(target=self._loop, name="embedded-engine", daemon=True)

    # ---- called from request threads --------------------------------------------------------

    def submit(self, job: Job) -> None:
        with self.cv:
            if self.closed:
                raise EngineError("engine is shut down")
            if job.rid in self.jobs:
                raise InvalidRequest(f"request id {job.rid!r} is already in flight")
            if len(self.pending) >= self.max_queue:
                raise EngineBusy(f"engine busy: {len(self.pending)} requests already waiting")
            self.pending.append(job)
            self.jobs[job.rid] = job
            self.cv.notify()

    def abort(self, rid: str) -> bool:
        with self.cv:
            job = self.jobs.get(rid)
            if job is not None:
                job.cancelled.set()
                self.cv.notify()
        return job is not None

    def snapshot(self) -> dict[str, float]:
        with self.cv:
            out = dict(self.counters)
            out["num_running_reqs"] = float(len(self.active))
            out["num_queue_reqs"] = float(len(self.pending))
            out["num_used_tokens"] = float(self.cache.total_tokens)
            out["max_total_num_tokens"] = float(self.cache.budget_tokens)
        return out

    def request_flush(self) -> None:
        with self.cv:
            self.flush_requested = True
            self.cv.notify()

    def stop(self) -> None:
        with self.cv:
            self.closed = True
            self.cv.notify()
        self.thread.join(timeout=30)

    # ---- the scheduler thread ----------------------------------------------------------------

    def _loop(self) -> None:
        while self._wait_for_work():
            try:
                self._admit()
                self._prefill_step()
                self._decode_step()
            except Exception as exc:  # fail the requests in flight, keep serving new ones
                log.exception("engine step failed")
                self._fail_all(EngineError(f"generation failed: {exc}"))
        self._fail_all(EngineError("engine is shut down"))

    def _wait_for_work(self) -> bool:
        with self.cv:
            while not self.closed and not self.pending and not self.active:
                if self.flush_requested:
                    break
                self.cv.wait()
            if self.flush_requested and not self.active:
                self.cache.clear()
                self.flush_requested = False
            return not self.closed

    def _admit(self) -> None:
        with self.cv:
            if not self.pending or len(self.active) >= self.max_running:
                return
            # longest cached prefix first; FIFO among equals (the sort is stable)
            cached = {id(j): match_length(self.cache, j.ids[:-1]) for j in self.pending}
            order = sorted(self.pending, key=lambda j: -cached[id(j)])
            prefilling = [s.job.ids for s in self.active if s.prefilling]
            for job in order:
                if len(self.active) >= self.max_running:
                    break
                shared = max((common_prefix_len(job.ids, ids) for ids in prefilling), default=0)
                if shared > cached[id(job)] + DEFER_SHARED_TOKENS:
                    continue  # admitted once that prefix is cached
                self.pending.remove(job)
                seq = self._start(job)
                self.active.append(seq)
                if seq.prefilling:
                    prefilling.append(job.ids)

    def _start(self, job: Job) -> Sequence:
        from transformers import DynamicCache

        # keep at least one prompt token to run, so there are logits to sample from
        cached, kv = self.cache.match(job.ids[:-1])
        budget = min(job.sampling.max_new_tokens, self.context_length - len(job.ids))
        return Sequence(
            job=job,
            cached=cached,
            budget=budget,
            stream=TextStream(decode=self.decode, stops=job.sampling.stop),
            eos=self.eos,
            fed=list(job.ids[:cached]),
            prefill_cache=DynamicCache(ddp_cache_data=kv or None, config=self.model.config),
        )

    @torch.inference_mode()
    def _prefill_step(self) -> None:
        seq = next((s for s in self.active if s.prefilling), None)
        if seq is None:
            return
        if seq.job.cancelled.is_set():
            seq.finish = "abort"
            self._finish(seq, [(layer.keys, layer.values) for layer in seq.prefill_cache.layers])
            return
        start = len(seq.fed)
        piece = seq.job.ids[start : start + PREFILL_CHUNK]
        out = self.model(
            input_ids=torch.tensor([piece]),
            cache=seq.prefill_cache,
            use_cache=True,
            logits_to_keep=1,
        )
        seq.fed.extend(piece)
        if seq.prefilling:
            return
        kv = [(layer.keys, layer.values) for layer in seq.prefill_cache.layers]
        seq.prefill_cache = None
        # the prompt's KV is shareable now, while this request is still decoding
        self.cache.insert(seq.fed, kv)
        seq.take(out.logits[0, -1])
        if seq.finish:
            self._finish(seq, kv)
        else:
            self.batch.add(kv)
            self.decoding.append(seq)

    @torch.inference_mode()
    def _decode_step(self) -> None:
        if not self.decoding:
            return
        from transformers import DynamicCache

        mask, positions = self.batch.step_inputs()
        cache = DynamicCache(ddp_cache_data=self.batch.layers, config=self.model.config)
        tokens = torch.tensor([[s.pending] for s in self.decoding])
        out = self.model(
            input_ids=tokens,
            attention_mask=mask,
            position_ids=positions,
            cache=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        self.batch.advanced([(layer.keys, layer.values) for layer in cache.layers])
        done: list[int] = []
        for row, seq in enumerate(self.decoding):
            seq.fed.append(seq.pending)
            seq.pending = None
            if seq.job.cancelled.is_set():
                seq.finish = "abort"
            else:
                seq.take(out.logits[row, -1])
            if seq.finish:
                done.append(row)
        for row in done:
            seq = self.decoding[row]
            self._finish(seq, [(k.clone(), v.clone()) for k, v in self.batch.row(row)])
        if done:
            self.batch.remove(done)
            self.decoding = [s for i, s in enumerate(self.decoding) if i not in set(done)]

    def _finish(self, seq: Sequence, kv: list) -> None:
        """Hand the request its last items, and its KV to the radix cache."""
        if seq.fed:
            self.cache.insert(seq.fed, kv)
        seq.flush_text()
        stats = seq.stats()
        with self.cv:
            self.active.remove(seq)
            self.jobs.pop(seq.job.rid, None)
            c = self.counters
            c["prompt_tokens_total"] += stats.prompt_tokens
            c["cached_tokens_total"] += stats.cached_tokens
            c["generation_tokens_total"] += stats.completion_tokens
            c["num_requests_total"] += 1
            c["num_aborted_requests_total"] += stats.finish_reason == "abort"
        seq.job.out.put(Finished(stats))

    def _fail_all(self, error: EngineError) -> None:
        with self.cv:
            victims = [s.job for s in self.active]
            if self.closed:
                victims += list(self.pending)
                self.pending.clear()
            self.active.clear()
            self.decoding.clear()
            self.batch = PaddedBatch()
            for job in victims:
                self.jobs.pop(job.rid, None)
                job.out.put(error)
