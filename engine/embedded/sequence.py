"""One request's decode state inside the scheduler: what it was given, what it has produced,
and the rule for when it is done."""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from engine.base import (
    FinishReason,
    GenerationStats,
    LogprobDelta,
    LogprobOptions,
    SamplingParams,
    TextDelta,
    TokenLogprob,
)
from engine.embedded.logprobs import (
    first_logit_position,
    sampling_logprobs,
    score_row,
    score_rows,
)
from engine.embedded.ngram_draft import NgramDrafter
from engine.embedded.penalties import Penalizer
from engine.embedded.sampling import GREEDY_BELOW, make_generator, sample_next
from engine.embedded.speculative import DraftPacer, SpeculativeStats
from engine.embedded.textstream import TextStream


@dataclass
class Job:
    """A request as queued: validated token ids and how to answer."""

    rid: str
    ids: list[int]
    sampling: SamplingParams
    constraint: Any = None  # engine.embedded.grammar.GrammarConstraint, when one was given
    logprobs: LogprobOptions | None = None
    out: queue.Queue = field(default_factory=queue.Queue)
    cancelled: threading.Event = field(default_factory=threading.Event)
    enqueued_at: float = field(default_factory=time.perf_counter)


@dataclass
class Sequence:
    """A running request. ``fed`` lists the tokens whose KV exists (prompt, then answer tokens
    fed back); ``pending`` is the last sampled token, not fed yet."""

    job: Job
    cached: int
    budget: int
    stream: TextStream
    eos: frozenset[int]
    fed: list[int] = field(default_factory=list)
    slot: int = -1  # this request's row in the scheduler's KV pool
    pending: int | None = None
    completion: int = 0
    finish: FinishReason | None = None
    matched: str | int | None = None
    admitted_at: float = field(default_factory=time.perf_counter)
    first_token_at: float | None = None
    generator: torch.Generator | None = None
    penalizer: Penalizer = field(init=False)
    prompt_logprobs: list[TokenLogprob] = field(default_factory=list)
    # speculation: the draft proposer over the prompt and the answer (None: declined, and
    # ``spec_declined`` says why); drafts proposed and accepted, steps that verified drafts
    drafter: NgramDrafter | None = None
    pacer: DraftPacer = field(default_factory=lambda: DraftPacer(1))
    spec_declined: str = ""
    drafted: int = 0
    accepted: int = 0
    verify_steps: int = 0

    def __post_init__(self) -> None:
        self.generator = make_generator(self.job.sampling.seed)
        self.penalizer = Penalizer(self.job.sampling, self.eos)
        options = self.job.logprobs
        if options is not None and options.start_len == 0:
            # nothing precedes the prompt's first token: it has no logprob
            self.prompt_logprobs.append(TokenLogprob(self.job.ids[0], None))

    @property
    def prefilling(self) -> bool:
        return len(self.fed) < len(self.job.ids)

    def prompt_logit_span(self, start: int, count: int) -> tuple[int, int]:
        """Of the prompt positions ``[start, start + count)`` about to be computed, the
        ``[lo, hi)`` whose logits score prompt tokens (empty unless prompt logprobs were
        asked). The prompt's last position is not one: it predicts the first new token."""
        options = self.job.logprobs
        if options is None or not options.wants_prompt(len(self.job.ids)):
            return start, start
        lo = max(start, first_logit_position(options))
        hi = min(start + count, len(self.job.ids) - 1)
        return lo, max(lo, hi)

    def score_prompt(self, logits: torch.Tensor, lo: int) -> None:
        """Record the prompt logprobs given by ``logits`` rows for positions ``lo, lo + 1, ...``."""
        assert self.job.logprobs is not None
        targets = self.job.ids[lo + 1 : lo + 1 + len(logits)]
        self.prompt_logprobs += score_rows(logits, targets, self.job.logprobs)

    def prompt_done(self) -> None:
        """The prefill has ended: send the prompt's logprobs (when asked), before any text."""
        options = self.job.logprobs
        if options is not None and options.wants_prompt(len(self.job.ids)):
            self.job.out.put(LogprobDelta(tuple(self.prompt_logprobs), prompt=True))

    def take(self, logits: torch.Tensor) -> None:
        """Sample the next token from ``logits`` and decide whether the request is done."""
        sp = self.job.sampling
        constraint = self.job.constraint
        # SGLang's order: penalties, then the grammar's mask, then sampling
        logits = self.penalizer.apply(logits)
        if constraint is not None:
            logits = constraint.mask(logits)
        token = sample_next(
            logits, sp.temperature, sp.top_p, self.generator, top_k=sp.top_k, min_p=sp.min_p
        )
        self.penalizer.observe(token)
        if self.drafter is not None:
            self.drafter.append(token)
        if self.job.logprobs is not None:
            greedy = sp.temperature < GREEDY_BELOW or sp.top_k == 1
            drawn_from = sampling_logprobs(logits, sp.temperature, greedy)
            self.job.out.put(LogprobDelta((score_row(drawn_from, token, self.job.logprobs),)))
        self.completion += 1
        if self.first_token_at is None:
            self.first_token_at = time.perf_counter()
        if constraint is not None:
            constraint.accept(token)
        if token in self.eos and not sp.ignore_eos:
            self.finish, self.matched = "stop", token
            return
        delta = self.stream.push(token)
        if delta:
            self.job.out.put(TextDelta(delta))
        if self.stream.stopped or (constraint is not None and constraint.is_terminated()):
            self.finish, self.matched = "stop", self.stream.matched
        elif self.completion >= self.budget:
            self.finish = "length"
        elif self.job.cancelled.is_set():
            self.finish = "abort"
        else:
            self.pending = token

    def stats(self) -> GenerationStats:
        now = time.perf_counter()
        start = self.job.enqueued_at
        return SpeculativeStats(
            prompt_tokens=len(self.job.ids),
            cached_tokens=self.cached,
            completion_tokens=self.completion,
            ttft_s=(self.first_token_at - start) if self.first_token_at else 0.0,
            e2e_s=now - start,
            finish_reason=self.finish or "abort",
            queue_s=self.admitted_at - start,
            matched_stop=self.matched if self.finish == "stop" else None,
            speculative=self.drafter is not None,
            spec_declined=self.spec_declined,
            spec_draft_tokens=self.drafted,
            spec_accepted_tokens=self.accepted,
            spec_verify_steps=self.verify_steps,
        )

    def flush_text(self) -> None:
        if self.finish != "abort":
            tail = self.stream.flush()
            if tail:
                self.job.out.put(TextDelta(tail))
