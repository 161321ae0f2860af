"""The engine contract: typed requests, streamed deltas, final stats and errors.

Every backend (the embedded CPU engine, the SGLang client) implements ``Engine``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

FinishReason = Literal["stop", "length", "abort"]


TOP_K_ALL = -1  # ``top_k`` for "the whole vocabulary" (SGLang spells it -1, or 1 << 30)


@dataclass(frozen=True)
class SamplingParams:
    """How to pick each next token, with SGLang's meaning for every field
    (``sglang/srt/sampling/sampling_params.py``).

    Penalties change the logits (in float32) before temperature, top-k, top-p and min-p, and
    greedy decoding sees them too. They count the tokens generated so far, not the prompt's:
    ``frequency_penalty`` subtracts ``count * value`` from a generated token's logit,
    ``presence_penalty`` subtracts ``value`` once it occurred, ``repetition_penalty`` divides a
    positive logit of an occurred token by ``value`` and multiplies a negative one by it.
    ``min_new_tokens`` forbids the end-of-sequence tokens until that many were generated (stop
    strings still end the answer). ``top_k`` 1, or a temperature below 1e-6, is greedy.
    """

    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    ignore_eos: bool = False  # generate exactly max_new_tokens (benchmarks, load tests)
    top_k: int = TOP_K_ALL
    min_p: float = 0.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0
    min_new_tokens: int = 0

    @property
    def penalized(self) -> bool:
        """Whether any penalty (or ``min_new_tokens``) changes the logits."""
        return bool(
            self.frequency_penalty
            or self.presence_penalty
            or self.repetition_penalty != 1.0
            or self.min_new_tokens > 0
        )


def sampling_problem(sp: SamplingParams) -> str | None:
    """The first value SGLang's ``SamplingParams.verify`` refuses, in its words; None if valid."""
    # every range test below is False for NaN, so NaN and infinities are refused too
    if not math.isfinite(sp.temperature) or sp.temperature < 0.0:
        return f"temperature must be a non-negative finite number, got {sp.temperature}."
    if not 0.0 < sp.top_p <= 1.0:
        return f"top_p must be in (0, 1], got {sp.top_p}."
    if not 0.0 <= sp.min_p <= 1.0:
        return f"min_p must be in [0, 1], got {sp.min_p}."
    if sp.top_k != TOP_K_ALL and sp.top_k < 1:
        return f"top_k must be -1 (disable) or at least 1, got {sp.top_k}."
    if not -2.0 <= sp.frequency_penalty <= 2.0:
        return f"frequency_penalty must be in [-2, 2], got {sp.frequency_penalty}."
    if not -2.0 <= sp.presence_penalty <= 2.0:
        return f"presence_penalty must be in [-2, 2], got {sp.presence_penalty}."
    if not 0.0 < sp.repetition_penalty <= 2.0:
        value = sp.repetition_penalty
        return f"repetition_penalty must be in (0, 2] (1.0 = no penalty), got {value}."
    if not 0 <= sp.min_new_tokens <= sp.max_new_tokens:
        return (
            f"min_new_tokens must be in [0, max_new_tokens({sp.max_new_tokens})], "
            f"got {sp.min_new_tokens}."
        )
    return None


@dataclass(frozen=True)
class LogprobOptions:
    """Which log probabilities a request asks for, with SGLang's meaning (``return_logprob``,
    ``logprob_start_len``, ``top_logprobs_num``, ``token_ids_logprob``).

    Every generated token's logprob is reported. Prompt tokens are reported from position
    ``start_len`` on (-1, or the prompt's length: none), each with the logprob of that token
    after all before it; the prompt's first token has none (``None``). Each reported position
    also lists its ``top_n`` most likely tokens and the logprobs of ``token_ids``.
    (SGLang 0.5.23 also writes ``None`` for the first reported token when ``start_len`` > 0;
    its own frontend's greedy choice and token healing fail on that, so the value is given.)

    Values are ``log_softmax`` in float32: of the model's logits for prompt tokens; for
    generated tokens, of the logits sampling draws from (penalties and any grammar mask
    applied, divided by the temperature unless decoding is greedy), before top-k, top-p and
    min-p. An impossible token's ``-inf`` is reported as float32's lowest finite value.
    """

    start_len: int = -1
    top_n: int = 0
    token_ids: tuple[int, ...] = ()

    def wants_prompt(self, prompt_len: int) -> bool:
        """Whether any prompt token is reported for a prompt of ``prompt_len`` tokens."""
        return 0 <= self.start_len < prompt_len


CONSTRAINT_NAMES = ("json_schema", "regex", "ebnf")
# SGLang 0.5.23's words (``SamplingParams.verify``); structural_tag is refused on its own here
MANY_CONSTRAINTS = "Only one of json_schema, regex, ebnf, or structural_tag can be set."


MAX_LOGPROB_ENTRIES = 1_000_000  # alternatives one request may ask for, over all its positions


def logprob_problem(
    options: LogprobOptions, prompt_len: int, vocab_size: int, max_new_tokens: int
) -> str | None:
    """What a request with ``options``, a prompt of ``prompt_len`` tokens and up to
    ``max_new_tokens`` new ones may not ask, in words naming the parameter (SGLang's where it
    has them); None if valid. Besides SGLang's checks, the alternatives asked for over all
    reported positions are bounded (``MAX_LOGPROB_ENTRIES``), so one request cannot make
    the server build and send gigabytes."""
    start = options.start_len
    if start < -1:
        return f"logprob_start_len must be -1 (no prompt logprobs) or at least 0, got {start}."
    if start > prompt_len:
        return (
            f"logprob_start_len={start} is higher than the number of input tokens "
            f"{prompt_len}. Please use a smaller logprob_start_len."
        )
    if not 0 <= options.top_n <= vocab_size:
        top_n = options.top_n
        return f"top_logprobs_num must be in [0, {vocab_size}] (the vocabulary), got {top_n}."
    for token_id in options.token_ids:
        if not 0 <= token_id < vocab_size:
            return (
                f"token_ids_logprob contains out-of-vocabulary token id {token_id}; "
                f"valid range is [0, {vocab_size})."
            )
    positions = (prompt_len - start if start >= 0 else 0) + max_new_tokens
    entries = positions * (options.top_n + len(options.token_ids))
    if entries > MAX_LOGPROB_ENTRIES:
        return (
            f"top_logprobs_num ({options.top_n}) and token_ids_logprob "
            f"({len(options.token_ids)} ids) over {positions} reported tokens ask for "
            f"{entries:,} logprobs, over the limit of {MAX_LOGPROB_ENTRIES:,}; ask for fewer "
            "alternatives, a later logprob_start_len or a lower max_new_tokens."
        )
    return None


@dataclass(frozen=True)
class GenerateRequest:
    """Exactly one of ``prompt`` (rendered text), ``messages`` (rendered by the engine with the
    model's chat template) or ``input_ids`` (already tokenised).

    At most one output constraint: ``json_schema`` (JSON Schema text; the output then parses
    and validates against it), ``regex`` (the whole output matches it) or ``ebnf`` (a grammar
    in xgrammar's EBNF, whose ``root`` rule the output matches)."""

    prompt: str | None = None
    messages: tuple[tuple[str, str], ...] | None = None  # (role, content)
    input_ids: tuple[int, ...] | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)
    request_id: str | None = None
    json_schema: str | None = None
    regex: str | None = None
    ebnf: str | None = None
    logprobs: LogprobOptions | None = None  # None: no logprobs (nothing extra is computed)

    def constraint(self) -> tuple[str, str] | None:
        """``(name, text)`` of the output constraint, or None; ``InvalidRequest`` if several."""
        given = [(n, getattr(self, n)) for n in CONSTRAINT_NAMES if getattr(self, n) is not None]
        if len(given) > 1:
            raise InvalidRequest(f"{MANY_CONSTRAINTS} Got {', '.join(n for n, _ in given)}.")
        return given[0] if given else None


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
    # the engine worker that served the request, where a gateway in front names it ("": one
    # engine, or not named); a cache shadow per worker follows its own worker's cache
    worker: str = ""


@dataclass(frozen=True)
class TextDelta:
    """A piece of newly generated text; always whole UTF-8 characters."""

    text: str


@dataclass(frozen=True)
class Finished:
    """The last item of every stream."""

    stats: GenerationStats


@dataclass(frozen=True)
class TokenLogprob:
    """One token's log probability at its position, with the position's alternatives."""

    token_id: int
    logprob: float | None  # None only for the prompt's first token
    top: tuple[tuple[int, float], ...] = ()  # the ``top_n`` most likely (id, logprob), best first
    asked: tuple[tuple[int, float], ...] = ()  # (id, logprob) of ``LogprobOptions.token_ids``


@dataclass(frozen=True)
class LogprobDelta:
    """Logprobs of prompt tokens (``prompt`` True: sent once, before any text) or of newly
    generated tokens, in order; only streamed when the request asked for logprobs. A generated
    token's logprob comes before (or with) the ``TextDelta`` holding its text."""

    tokens: tuple[TokenLogprob, ...]
    prompt: bool = False


StreamItem = TextDelta | LogprobDelta | Finished


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
    # requests the engine holds at once, running and waiting (0: not known); more are refused
    # as busy
    max_requests: int = 0
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

    def token_texts(self, ids: list[int]) -> list[str]:
        """Each token's own text, decoded alone (as SGLang writes tokens in logprobs)."""
        ...

    def token_bytes(self, ids: list[int]) -> list[bytes]:
        """Each token's raw bytes (a token may hold part of a UTF-8 character)."""
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
