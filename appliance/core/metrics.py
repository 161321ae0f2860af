"""The app's own Prometheus metrics, served on the web app's ``/metrics`` beside the engine's.

``appliance_retrieval_latency_seconds`` (histogram), ``appliance_chat_turns_total`` (counter by
``outcome``: done | error), ``appliance_errors_total`` (counter by ``kind``),
``appliance_answer_sentences_total`` (answer sentences by ``verdict``: supported | unsupported),
``appliance_unsupported_facts_total`` (facts no source holds) and ``appliance_answers_total``
(by answer ``mode``). When the engine
is the embedded one, its collectors (``sglang:*`` names, see engine/server/metrics.py)
are rendered into the same text and fed each finished turn's stats, so one scrape sees both.
Every instance has its own registry: nothing is registered globally.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from appliance.core.errors import ErrorKind
from engine.base import Engine, EngineError, GenerationStats

RETRIEVAL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# the ``kind`` label takes any ``ErrorKind``; these series exist from the start (at 0): the
# engine's usual refusals and failures, and our own bugs
ERROR_KINDS: tuple[ErrorKind, ...] = (
    "busy",
    "unavailable",
    "prompt_too_long",
    "engine_error",
    "internal",
)


class AppMetrics:
    """Counters the chat service updates per turn; ``render`` gives the Prometheus text."""

    def __init__(self, engine: Engine | None = None, model_name: str = "") -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.retrieval = Histogram(
            "appliance_retrieval_latency_seconds",
            "Hybrid retrieval latency per question",
            registry=self.registry,
            buckets=RETRIEVAL_BUCKETS,
        )
        self.turns = Counter(
            "appliance_chat_turns", "Chat turns by outcome", ["outcome"], registry=self.registry
        )
        self.errors = Counter(
            "appliance_errors", "Chat errors by kind", ["kind"], registry=self.registry
        )
        self.sentences = Counter(
            "appliance_answer_sentences",
            "Checked answer sentences by verdict",
            ["verdict"],
            registry=self.registry,
        )
        self.unsupported_facts = Counter(
            "appliance_unsupported_facts",
            "Facts (numbers, extensions, e-mail addresses, URLs, dates) found in no source",
            registry=self.registry,
        )
        self.answers = Counter(
            "appliance_answers", "Answers by answer mode", ["mode"], registry=self.registry
        )
        self.repeats_stopped = Counter(
            "appliance_repeats_stopped",
            "Answers stopped at a sentence they had said already (rag.repeats)",
            registry=self.registry,
        )
        for verdict in ("supported", "unsupported"):
            self.sentences.labels(verdict=verdict)
        for outcome in ("done", "error"):
            self.turns.labels(outcome=outcome)  # the series exist before the first turn
        for kind in ERROR_KINDS:
            self.errors.labels(kind=kind)
        self.engine_metrics = None
        try:
            info = engine.info() if engine is not None else None
        except EngineError:  # a remote engine that is down now: it serves its own /metrics
            info = None
        if info is not None and info.backend == "embedded":
            from engine.server.metrics import ServerMetrics

            self.engine_metrics = ServerMetrics(engine, model_name or info.model)

    def observe_retrieval(self, retrieval_ms: float) -> None:
        self.retrieval.observe(max(0.0, retrieval_ms) / 1000)

    def turn_done(self, stats: GenerationStats | None, repeated: bool = False) -> None:
        """A finished turn; ``stats`` None for one the engine took no part in (extractive);
        ``repeated``: the repeat stop ended it."""
        self.turns.labels(outcome="done").inc()
        if repeated:
            self.repeats_stopped.inc()
        if self.engine_metrics is not None and stats is not None:
            self.engine_metrics.observe(stats)

    def answer_checked(self, mode: str, supported: int, unsupported: int, facts: int) -> None:
        """One answer of ``mode`` and its verdicts: sentence counts and unsupported facts."""
        self.answers.labels(mode=mode).inc()
        self.sentences.labels(verdict="supported").inc(supported)
        self.sentences.labels(verdict="unsupported").inc(unsupported)
        self.unsupported_facts.inc(facts)

    def turn_failed(self, kind: ErrorKind) -> None:
        """A turn that ended in an error of ``kind`` (counted under both metrics)."""
        self.turns.labels(outcome="error").inc()
        self.error(kind)

    def error(self, kind: ErrorKind) -> None:
        """One error of ``kind``, the label value as given (``internal`` when empty)."""
        self.errors.labels(kind=kind or "internal").inc()

    def render(self) -> bytes:
        """The app's metrics, then the embedded engine's (SGLang serves its own when remote)."""
        text = generate_latest(self.registry)
        if self.engine_metrics is not None:
            text += self.engine_metrics.render()
        return text
