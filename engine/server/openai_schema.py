"""OpenAI request bodies (``/v1/chat/completions``, ``/v1/completions``) and their translation
into engine requests.

Unknown fields are ignored (as SGLang and OpenAI-compatible servers do); fields the engine
cannot honour are refused unless they hold their neutral value. Defaults follow SGLang:
``temperature`` and ``top_p`` 1.0; chat ``max_tokens`` up to the end of the context window,
completions ``max_tokens`` 16. OpenAI's ``frequency_penalty`` and ``presence_penalty`` and
SGLang's extensions ``top_k``, ``min_p``, ``min_tokens`` (its name here for
``min_new_tokens``), ``repetition_penalty``, ``ignore_eos``, ``rid``, ``regex`` and ``ebnf``
are honoured, with SGLang's ranges and messages; so are ``n`` and ``logprobs``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from engine.base import MANY_CONSTRAINTS, InvalidRequest, LogprobOptions, SamplingParams
from engine.server.sampling import MAX_N, checked, top_k_value

COMPLETIONS_DEFAULT_MAX_TOKENS = 16
MAX_TOP_LOGPROBS = 20  # OpenAI's limit for chat's ``top_logprobs``


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class StreamOptions(_Body):
    include_usage: bool | None = False
    continuous_usage_stats: bool | None = False


class ResponseFormat(_Body):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: dict[str, Any] | None = None  # {"name": ..., "schema": {...}, "strict": ...}


class ChatMessage(_Body):
    role: str
    content: str | list[dict[str, Any]] | None = None


class CommonBody(_Body):
    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: str | list[str] | None = None
    seed: int | None = None
    n: int | None = 1
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    logprobs: bool | int | None = None
    response_format: ResponseFormat | None = None
    user: str | None = None
    # SGLang's extensions
    top_k: int | None = None
    min_p: float | None = None
    min_tokens: int | None = None
    repetition_penalty: float | None = None
    ignore_eos: bool | None = None
    rid: str | None = None
    regex: str | None = None
    ebnf: str | None = None

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class ChatBody(CommonBody):
    messages: list[ChatMessage]
    max_completion_tokens: int | None = None
    top_logprobs: int | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None


class CompletionBody(CommonBody):
    prompt: str | list[str] | list[int] | list[list[int]]
    echo: bool | None = False
    suffix: str | None = None
    best_of: int | None = None


def _check_neutral(body: CommonBody) -> None:
    n = 1 if body.n is None else body.n
    if not 1 <= n <= MAX_N:
        raise InvalidRequest(f"n must be in [1, {MAX_N}], got {n}")


def logprobs_for(body: CommonBody) -> LogprobOptions | None:
    """Completions: ``logprobs`` N (0 or more) reports each token's logprob and its N most
    likely alternatives (with ``echo``, the prompt's tokens' too). Chat: ``logprobs: true``,
    with ``top_logprobs`` alternatives."""
    if isinstance(body, ChatBody):
        if not body.logprobs:
            return None
        top = body.top_logprobs or 0
        if not 0 <= top <= MAX_TOP_LOGPROBS:
            raise InvalidRequest(f"top_logprobs must be in [0, {MAX_TOP_LOGPROBS}], got {top}")
        return LogprobOptions(top_n=top)
    if body.logprobs is None or body.logprobs is False:
        return None
    if body.logprobs is True or body.logprobs < 0:
        raise InvalidRequest("logprobs must be a whole number of alternatives (0 or more)")
    # echo: the prompt's tokens are reported too, the first without a logprob
    start = 0 if isinstance(body, CompletionBody) and body.echo else -1
    return LogprobOptions(start_len=start, top_n=body.logprobs)


def sampling_for(body: CommonBody, max_tokens: int | None, context_length: int) -> SamplingParams:
    """``max_tokens`` None means: up to the end of the context window."""
    _check_neutral(body)
    if max_tokens is not None and max_tokens < 1:
        raise InvalidRequest("max_tokens must be at least 1")
    stop = [body.stop] if isinstance(body.stop, str) else (body.stop or [])
    return checked(
        SamplingParams(
            max_new_tokens=max_tokens if max_tokens is not None else context_length,
            temperature=_or(body.temperature, 1.0),
            top_p=_or(body.top_p, 1.0),
            stop=tuple(s for s in stop if s),
            seed=body.seed,
            ignore_eos=bool(body.ignore_eos),
            top_k=top_k_value(body.top_k),
            min_p=_or(body.min_p, 0.0),
            frequency_penalty=_or(body.frequency_penalty, 0.0),
            presence_penalty=_or(body.presence_penalty, 0.0),
            repetition_penalty=_or(body.repetition_penalty, 1.0),
            min_new_tokens=body.min_tokens or 0,
        )
    )


def _or(value: float | None, default: float) -> float:
    return default if value is None else float(value)


def constraint_for(body: CommonBody) -> dict[str, str | None]:
    """The output constraint as ``GenerateRequest`` keyword arguments: ``response_format``
    (``json_object``: any JSON object; ``json_schema``: its schema), or SGLang's extensions
    ``regex`` and ``ebnf``; at most one of them."""
    out: dict[str, str | None] = {"json_schema": None, "regex": body.regex, "ebnf": body.ebnf}
    fmt = body.response_format
    if fmt is not None and fmt.type == "json_object":
        out["json_schema"] = json.dumps({"type": "object"})
    elif fmt is not None and fmt.type == "json_schema":
        schema = (fmt.json_schema or {}).get("schema")
        if not isinstance(schema, dict):
            raise InvalidRequest("response_format.json_schema.schema must be a JSON Schema object")
        out["json_schema"] = json.dumps(schema)
    given = [key for key, value in out.items() if value is not None]
    if len(given) > 1:
        raise InvalidRequest(f"{MANY_CONSTRAINTS} Got {', '.join(given)}.")
    return out


def chat_messages(body: ChatBody) -> tuple[tuple[str, str], ...]:
    if body.tools:
        raise InvalidRequest("tools are not supported by this engine")
    if not body.messages:
        raise InvalidRequest("messages must not be empty")
    out = []
    for m in body.messages:
        role = "system" if m.role == "developer" else m.role
        if m.content is None or isinstance(m.content, str):
            out.append((role, m.content or ""))
            continue
        texts = []
        for part in m.content:
            if part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise InvalidRequest("only text message parts are supported (text-only model)")
            texts.append(part["text"])
        out.append((role, "".join(texts)))
    return tuple(out)


def completion_prompts(body: CompletionBody) -> list[dict[str, Any]]:
    """Each prompt as GenerateRequest keyword arguments (text, or token ids)."""
    if body.suffix:
        raise InvalidRequest("suffix is not supported by this engine")
    if (body.best_of or 1) != 1:
        raise InvalidRequest("best_of: only 1 is supported")
    p = body.prompt
    if isinstance(p, str):
        return [{"prompt": p}]
    if not p:
        raise InvalidRequest("prompt must not be empty")
    if all(isinstance(x, int) for x in p):
        return [{"input_ids": tuple(p)}]
    if all(isinstance(x, str) for x in p):
        return [{"prompt": x} for x in p]
    return [{"input_ids": tuple(x)} for x in p]  # type: ignore[arg-type]
