"""The embedded engine's scheduler: continuous batching over one CPU model.

One thread owns the model, the KV pool and the radix cache. Each loop turn it
1. admits waiting requests while fewer than ``max_running`` run, longest cached prefix first
   (SGLang's ``lpm`` policy), copying each one's cached prefix from the radix cache into a free
   row of the KV pool (every shared token is reused: the radix cache's page is 1 token);
2. runs one packed forward pass: one token for every decoding request plus prompt tokens of
   the oldest requests still prefilling, ``prefill_chunk`` tokens in all (see attention.py;
   set from this CPU's speed, ``prefill_chunk.py``; ``PREFILL_CHUNK_IDLE`` when no request is
   decoding).
Packing keeps running streams flowing while long prompts are prefilled, and the decode tokens
ride along the prefill's matrix multiplies. A request that ends (stop, length, cancel) leaves
the batch at once and its KV goes into the radix cache.

Invariant: ``decoding[i].slot == i`` (decoding rows are contiguous from 0) and
``owners[s]`` is the request holding pool row ``s``.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

import torch

from engine.base import EngineBusy, EngineError, Finished, InvalidRequest
from engine.embedded.attention import StepPlan, make_plan
from engine.embedded.attention_routes import (
    NATIVE_PREFILL,
    DecodeKernel,
    PrefillKernel,
    PrefillRoute,
)
from engine.embedded.draft_budget import DraftBudget
from engine.embedded.draft_pool import DraftPool
from engine.embedded.kv_pool import KVPool
from engine.embedded.logprobs import first_logit_position
from engine.embedded.native import NativeKernels
from engine.embedded.ngram_draft import NgramDrafter
from engine.embedded.prefill_chunk import DEFAULT, MOST
from engine.embedded.radix_cache import RadixKVCache, common_prefix_len, match_length
from engine.embedded.sequence import Job, Sequence
from engine.embedded.spec_verify import plan_drafts, verify
from engine.embedded.speculative import OFF, DraftPacer, SpeculativeConfig, decline_reason
from engine.embedded.step_pack import pack_step
from engine.embedded.textstream import TextStream

log = logging.getLogger(__name__)

PREFILL_CHUNK = DEFAULT  # tokens per step (decode ones included) while some request decodes
# ... and while none is: nobody waits for a next token, and one causal pass over a whole prompt
# beats masked chunks (cold TTFT of a 1,550-token prompt ~6% lower, measured on 2 cores)
PREFILL_CHUNK_IDLE = MOST
# a waiting request that shares more than this many uncached tokens with a request still being
# prefilled waits for that prefill to land in the radix cache, instead of computing it twice
DEFER_SHARED_TOKENS = 32

COUNTERS = (
    "prompt_tokens_total",
    "cached_tokens_total",
    "generation_tokens_total",
    "num_requests_total",
    "num_aborted_requests_total",
    "spec_draft_tokens_total",
    "spec_accepted_tokens_total",
    "spec_verify_steps_total",
)


class Scheduler:
    def __init__(
        self,
        forward: Callable[[list[int], StepPlan, list[int]], torch.Tensor],
        decode,  # noqa: ANN001 - token ids -> text
        eos: frozenset[int],
        context_length: int,
        kv_budget_tokens: int,
        max_running: int,
        max_queue: int,
        pool: KVPool,
        kernel: NativeKernels | None = None,
        speculative: SpeculativeConfig = OFF,
        route: PrefillRoute = NATIVE_PREFILL,
        decoder: DecodeKernel | None = None,
        budget: DraftBudget | None = None,
        drafts: DraftPool | None = None,
        prefill_chunk: int = PREFILL_CHUNK,
        prefiller: PrefillKernel | None = None,
    ) -> None:
        self.forward = forward  # one packed step: (tokens, plan, keep) -> logits
        self.kernel = kernel  # native attention, or None (PyTorch attention)
        self.route = route  # which prefill segments the kernel attends (the rest: SDPA)
        self.decoder = decoder  # decode attention without ``kernel`` (float32, AVX2), or None
        self.prefiller = prefiller  # prefill attention without ``kernel`` (float32, AVX2), or None
        self.speculative = speculative  # prompt-lookup drafts for decoding requests
        self.budget = budget  # how many drafts a step is worth here (None: all proposed)
        self.draft_pool = drafts  # earlier answers to draft from (None: own history only)
        self.prefill_chunk = prefill_chunk  # a step's tokens while some request decodes
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
        self.pool = pool
        self.decoding: list[Sequence] = []  # pool rows 0 .. len - 1, in order
        self.shared = 0  # leading prompt tokens all decoding rows have in common
        self.owners: list[Sequence | None] = [None] * max_running  # pool row -> request
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
                with torch.inference_mode():
                    self._admit()
                    self._step()
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
                try:
                    seq = self._start(job)
                except Exception as exc:
                    self.jobs.pop(job.rid, None)
                    job.out.put(EngineError(f"generation failed: {exc}"))
                    raise
                self.active.append(seq)
                if seq.prefilling:
                    prefilling.append(job.ids)

    def _start(self, job: Job) -> Sequence:
        # keep at least one prompt token to run, so there are logits to sample from; prompt
        # logprobs need the logits of every position they score, so those are computed anew
        reusable = len(job.ids) - 1
        if job.logprobs is not None and job.logprobs.wants_prompt(len(job.ids)):
            reusable = min(reusable, first_logit_position(job.logprobs))
        # views of the cache's KV, copied into the pool row below before the cache changes
        cached, pieces = self.cache.match_pieces(job.ids[:reusable])
        budget = min(job.sampling.max_new_tokens, self.context_length - len(job.ids))
        seq = Sequence(
            job=job,
            cached=cached,
            budget=budget,
            stream=TextStream(decode=self.decode, stops=job.sampling.stop),
            eos=self.eos,
            fed=list(job.ids[:cached]),
        )
        seq.spec_declined = decline_reason(self.speculative)
        if not seq.spec_declined:
            seq.drafter = NgramDrafter(self.speculative.draft, job.ids, self.draft_pool)
            seq.pacer = DraftPacer(self.speculative.draft.max_tokens)
        # decoding requests hold rows 0 .. len(decoding) - 1; prefilling ones take the top rows
        seq.slot = max(i for i, owner in enumerate(self.owners) if owner is None)
        self.pool.load_pieces(seq.slot, pieces)
        self.owners[seq.slot] = seq
        return seq

    def _step(self) -> None:
        """One packed forward: a token for every decoding request, plus prompt tokens of the
        oldest requests still prefilling, up to ``prefill_chunk`` tokens in all
        (PREFILL_CHUNK_IDLE when none decodes)."""
        for seq in [s for s in self.active if s.prefilling and s.job.cancelled.is_set()]:
            seq.finish = "abort"
            self._finish(seq)
        # a step's token budget counts its decode tokens too: a GEMM over 512 rows runs ~8%
        # faster than over 518 (measured), and a step's latency stays level as streams join
        room = self.prefill_chunk - len(self.decoding) if self.decoding else PREFILL_CHUNK_IDLE
        # speculation: a decoding row's drafts run as decode queries on its own pool row, at the
        # positions after its pending token; every draft position's logits are kept
        drafts = plan_drafts(self.decoding, self.speculative, self.context_length, self._cap(room))
        step = pack_step(self.decoding, self.active, drafts, room)
        if step is None:
            return
        n = len(self.decoding)
        plan = make_plan(
            self.pool, n, step.segments, self.kernel, self.shared, step.draft_counts, self.route,
            self.decoder, self.prefiller,
        )  # fmt: skip
        logits = self.forward(step.tokens, plan, step.keep)
        for seq, lo, row, count in step.scored:
            seq.score_prompt(logits[row : row + count], lo)
        done: list[Sequence] = []
        step_drafted = step_accepted = 0
        for row, seq in enumerate(self.decoding):
            draft = step.drafts.get(row, [])
            accepted = verify(seq, logits[step.verify_rows[row]], draft)
            if draft:
                step_drafted += len(draft)
                step_accepted += accepted
                seq.drafted += len(draft)
                seq.accepted += accepted
                seq.verify_steps += 1
                seq.pacer.update(len(draft), accepted)
                # the KV of rejected drafts is dropped: the row ends after the tokens fed
                self.pool.lengths[row] = len(seq.fed)
            if seq.finish:
                done.append(seq)
        if self.budget is not None and self.decoding:
            self.budget.record(step_drafted, step_accepted)
        for seq in done:
            self._finish(seq)
        for seg, seq, row in zip(step.segments, step.owners, step.last_rows, strict=True):
            seq.fed.extend(seq.job.ids[seg.start : seg.start + seg.count])
            if seq.prefilling:
                continue
            seq.prompt_done()
            # the first token goes out before the prompt's KV is copied into the radix cache
            # (for a 1,550-token prompt 36 MB, much of it fresh memory): TTFT does not wait
            seq.take(logits[row])
            if seq.finish:
                self._finish(seq)  # which caches the prompt's KV
                continue
            # the prompt's KV is shareable now, while this request is still decoding (``take``
            # does not feed its token: ``fed`` is still the prompt)
            self.cache.insert(seq.fed, self.pool.row(seq.slot, len(seq.fed)))
            self._join_decoding(seq)

    def _cap(self, room: int) -> int:
        """Draft tokens this step may run: ``room``, or fewer where the budget says more would
        cost the step more than they are expected to give."""
        if self.budget is None or not self.speculative.enabled or not self.decoding:
            return room
        prompt = sum(len(s.job.ids) - len(s.fed) for s in self.active if s.prefilling)
        limit = min(room, self.speculative.max_step_drafts)
        return self.budget.cap(len(self.decoding), min(prompt, room - limit), limit)

    def _join_decoding(self, seq: Sequence) -> None:
        """Move ``seq`` into row ``len(decoding)`` (decoding rows stay contiguous)."""
        row = len(self.decoding)
        other = self.owners[row]
        if other is not seq:
            if other is None:
                self.pool.move(seq.slot, row)
            else:  # another request still prefilling there: trade rows
                self.pool.swap(seq.slot, row)
                other.slot = seq.slot
            self.owners[seq.slot] = other
            self.owners[row] = seq
            seq.slot = row
        self.decoding.append(seq)
        self.shared = self._shared_prompt()

    def _release(self, seq: Sequence) -> None:
        """Free ``seq``'s row; the last decoding row moves into a gap it leaves."""
        row = seq.slot
        self.owners[row] = None
        if row < len(self.decoding) and self.decoding[row] is seq:
            last = len(self.decoding) - 1
            if row != last:
                tail = self.decoding[last]
                self.pool.move(last, row)
                tail.slot = row
                self.decoding[row] = tail
                self.owners[row] = tail
                self.owners[last] = None
            self.decoding.pop()
            self.shared = self._shared_prompt()

    def _shared_prompt(self) -> int:
        """How many leading prompt tokens every decoding row has in common: their KV is the
        same in every row, so decode attention reads it once (from row 0)."""
        if len(self.decoding) < 2:
            return 0
        first = self.decoding[0].job.ids
        return min(common_prefix_len(first, s.job.ids) for s in self.decoding[1:])

    def _finish(self, seq: Sequence) -> None:
        """Hand the request its last items, its KV to the radix cache and its answer to the
        draft pool."""
        if seq.fed:
            self.cache.insert(seq.fed, self.pool.row(seq.slot, len(seq.fed)))
        self._release(seq)
        drafts = self.draft_pool  # a finished answer is drafted from by later requests
        if drafts is not None and drafts.learning and seq.drafter and seq.finish != "abort":
            drafts.add(seq.drafter.tokens[len(seq.job.ids) :])
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
            c["spec_draft_tokens_total"] += seq.drafted
            c["spec_accepted_tokens_total"] += seq.accepted
            c["spec_verify_steps_total"] += seq.verify_steps
        seq.job.out.put(Finished(stats))

    def _fail_all(self, error: EngineError) -> None:
        with self.cv:
            victims = [s.job for s in self.active]
            if self.closed:
                victims += list(self.pending)
                self.pending.clear()
            self.active.clear()
            self.decoding.clear()
            self.owners = [None] * self.max_running
            for job in victims:
                self.jobs.pop(job.rid, None)
                job.out.put(error)
