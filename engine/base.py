"""The engine contract: typed requests, streamed deltas, final stats and errors.

Every backend (the embedded CPU engine, the SGLang client) implements ``Engine``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

FinishReason = Literal["stop", "length", "abort"]


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    ignore_eos: bool = False  # generate exactly max_new_tokens (benchmarks, load tests)


@dataclass(frozen=True)
class GenerateRequest:
    """Exactly one of ``prompt`` (rendered text), ``messages`` (rendered by the engine with the
    model's chat template) or ``input_ids`` (already tokenised)."""

    prompt: str | None = None
    messages: tuple[tuple[str, str], ...] | None = None  # (role, content)
    input_ids: tuple[int, ...] | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)
    request_id: str | None = None
    # a JSON Schema (as a string); the output then always parses and validates against it
    json_schema: str | None = None


@dataclass(frozen=True)
class GenerationStats:
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    ttft_s: float
    e2e_s: float
    finish_reason: FinishReason
    queue_s: float = 0.0
    # what ended a "stop": the stop string, or the end-of-sequence token id; None otherwise
    matched_stop: str | int | None = None


@dataclass(frozen=True)
class TextDelta:
    """A piece of newly generated text; always whole UTF-8 characters."""

    text: str


@dataclass(frozen=True)
class Finished:
    """The last item of every stream."""

    stats: GenerationStats


StreamItem = TextDelta | Finished


@dataclass(frozen=True)
class EngineInfo:
    backend: str
    model: str
    context_length: int
    profile: str
    dtype: str
    # prefix-cache granularity: a shared prefix is reused in whole pages of this many tokens
    # (1: every shared token; SGLang's ``--page-size``; vLLM's block size)
    cache_page_tokens: int = 1
    # how the backend computes, in words (e.g. the embedded engine's runner and attention)
    runtime: str = ""


class EngineError(RuntimeError):
    """Base class of errors a backend raises; ``kind`` is stable for UIs and metrics."""

    kind = "engine_error"


class EngineBusy(EngineError):
    kind = "busy"

    def __init__(self, message: str, retry_after_s: float = 2.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class PromptTooLong(EngineError):
    kind = "prompt_too_long"


class EngineUnavailable(EngineError):
    kind = "unavailable"


class InvalidRequest(EngineError):
    """The request itself is malformed (empty prompt, bad schema, unknown option)."""

    kind = "invalid_request"


@runtime_checkable
class Engine(Protocol):
    """What the rest of the appliance may ask of an engine."""

    def generate(self, request: GenerateRequest) -> Iterator[StreamItem]:
        """Stream ``TextDelta`` items, then exactly one ``Finished``.

        Raises ``EngineBusy`` or ``PromptTooLong`` before any compute; closing the iterator
        early cancels the request and frees its resources.
        """
        ...

    def count_tokens(self, text: str) -> int:
        """Number of tokens ``text`` takes in this engine's tokenizer."""
        ...

    def render_chat(self, messages: tuple[tuple[str, str], ...]) -> str:
        """The exact prompt text the engine builds from chat messages."""
        ...

    def abort(self, request_id: str) -> bool:
        """Cancel a waiting or running request; False when no such request is in flight."""
        ...

    def health(self) -> bool: ...

    def info(self) -> EngineInfo: ...

    def metrics(self) -> dict[str, float]:
        """Counters and gauges under SGLang's metric names (without the ``sglang:`` prefix)."""
        ...

    def flush_cache(self) -> None: ...

    def close(self) -> None: ...
