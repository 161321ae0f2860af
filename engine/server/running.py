"""Running engine requests for the HTTP routes: ids, tracking, cancellation, metrics.

A ``TrackedStream`` wraps one engine stream. Closing it (the client left, the response
ended, an error) closes the engine's iterator, which cancels the request; a stream closed
before it was ever read is aborted by id, since closing a never-started generator runs none of
its code.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace

from engine.base import (
    Engine,
    GenerateRequest,
    GenerationStats,
    InvalidRequest,
    LogprobDelta,
    StreamItem,
    TextDelta,
)
from engine.server.logprob_format import LogprobLog
from engine.server.metrics import ServerMetrics
from engine.stream import EngineStream


def new_rid() -> str:
    return uuid.uuid4().hex


def check_fits(n: int, prompts: int, capacity: int) -> None:
    """Refuse ``n`` samples of ``prompts`` prompts that the engine could never hold at once
    (``capacity``: ``EngineInfo.max_requests``, 0 when unknown): busy would never clear."""
    if n > 1 and capacity and n * prompts > capacity:
        raise InvalidRequest(
            f"n={n} samples of {prompts} prompt(s) are {n * prompts} requests; this engine holds "
            f"at most {capacity} at once: ask for fewer samples"
        )


class TrackedStream(EngineStream):
    """An engine stream that records its stats when finished and cancels when closed early."""

    def __init__(
        self, runner: Runner, rid: str, items: Iterator[StreamItem], started_at: float
    ) -> None:
        super().__init__(items)
        self.rid = rid
        self.started_at = started_at
        self.latency_s = 0.0  # request arrival to finish, as SGLang's ``e2e_latency``
        self._runner = runner

    def cancel(self) -> None:
        """Ask the engine to stop this request; safe from any thread, at any time."""
        if self.stats is None:
            self._runner.engine.abort(self.rid)

    def _on_finished(self) -> None:
        self.latency_s = time.perf_counter() - self.started_at
        self._runner.finished(self)

    def _release(self, finished: bool) -> None:
        try:
            if not finished:
                self._runner.engine.abort(self.rid)
            close = getattr(self._items, "close", None)
            if close is not None:
                close()
        finally:
            self._runner.forget(self.rid)


@dataclass(frozen=True)
class Result:
    text: str
    stats: GenerationStats
    latency_s: float
    logprobs: LogprobLog  # empty unless the request asked for logprobs


def collect(stream: TrackedStream) -> Result:
    """Read a whole stream (a non-streamed request)."""
    parts: list[str] = []
    log = LogprobLog()
    try:
        for item in stream:
            if isinstance(item, TextDelta):
                parts.append(item.text)
            elif isinstance(item, LogprobDelta):
                log.add(item)
    finally:
        stream.close()
    assert stream.stats is not None
    return Result("".join(parts), stream.stats, stream.latency_s, log)


class Runner:
    """Starts requests on the engine and knows which of them are in flight."""

    def __init__(self, engine: Engine, metrics: ServerMetrics) -> None:
        self.engine = engine
        self._metrics = metrics
        self._inflight: set[str] = set()
        self._lock = threading.Lock()

    def start(self, request: GenerateRequest) -> TrackedStream:
        """Submit ``request`` (its ``request_id`` set); engine errors are raised here."""
        rid = request.request_id or new_rid()
        if request.request_id is None:
            request = replace(request, request_id=rid)
        started_at = time.perf_counter()
        items = self.engine.generate(request)
        with self._lock:
            self._inflight.add(rid)
        return TrackedStream(self, rid, iter(items), started_at)

    def warm(self, request: GenerateRequest) -> None:
        """Prefill ``request``'s prompt into the prefix cache and wait for it (a one-token,
        greedy, unconstrained run whose output is dropped): what SGLang does before it starts
        ``n`` > 1 samples of one prompt, so that they share a prompt prefilled once."""
        sampling = replace(
            request.sampling, max_new_tokens=1, min_new_tokens=0, temperature=0.0, ignore_eos=True
        )
        plain = replace(
            request,
            sampling=sampling,
            request_id=new_rid(),
            json_schema=None,
            regex=None,
            ebnf=None,
            logprobs=None,
        )
        collect(self.start(plain))

    def start_all(self, requests: list[GenerateRequest]) -> list[TrackedStream]:
        """Submit a batch; when one is refused, the ones already submitted are cancelled."""
        streams: list[TrackedStream] = []
        try:
            for request in requests:
                streams.append(self.start(request))
        except BaseException:
            for stream in streams:
                stream.close()
            raise
        return streams

    def finished(self, stream: TrackedStream) -> None:
        assert stream.stats is not None
        self._metrics.observe(stream.stats)
        self.forget(stream.rid)

    def forget(self, rid: str) -> None:
        with self._lock:
            self._inflight.discard(rid)

    def abort(self, rid: str) -> bool:
        return self.engine.abort(rid)

    def abort_all(self) -> int:
        with self._lock:
            rids = list(self._inflight)
        return sum(1 for rid in rids if self.engine.abort(rid))
