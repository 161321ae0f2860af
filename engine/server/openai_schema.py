"""OpenAI request bodies (``/v1/chat/completions``, ``/v1/completions``) and their translation
into engine requests.

Unknown fields are ignored (as SGLang and OpenAI-compatible servers do); fields the engine
cannot honour are refused unless they hold their neutral value. Defaults follow SGLang:
``temperature`` and ``top_p`` 1.0; chat ``max_tokens`` up to the end of the context window,
completions ``max_tokens`` 16. SGLang's extensions ``top_k`` (-1/0 or 1), ``ignore_eos`` and
``rid`` are accepted.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from engine.base import InvalidRequest, SamplingParams
from engine.server.sampling import top_k_is_greedy

COMPLETIONS_DEFAULT_MAX_TOKENS = 16


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
    ignore_eos: bool | None = None
    rid: str | None = None

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
    if (body.n or 1) != 1:
        raise InvalidRequest("n: only n=1 is supported")
    if body.logprobs:
        raise InvalidRequest("logprobs are not supported by this engine")
    for name in ("frequency_penalty", "presence_penalty"):
        if getattr(body, name):
            raise InvalidRequest(f"{name} is not supported by this engine (must be 0)")


def sampling_for(body: CommonBody, max_tokens: int | None, context_length: int) -> SamplingParams:
    """``max_tokens`` None means: up to the end of the context window."""
    _check_neutral(body)
    if max_tokens is not None and max_tokens < 1:
        raise InvalidRequest("max_tokens must be at least 1")
    temperature = 1.0 if body.temperature is None else body.temperature
    if not math.isfinite(temperature) or temperature < 0:
        raise InvalidRequest("temperature must be a non-negative number")
    top_p = 1.0 if body.top_p is None else body.top_p
    if not 0.0 < top_p <= 1.0:
        raise InvalidRequest("top_p must be in (0, 1]")
    if top_k_is_greedy(body.top_k):
        temperature = 0.0
    stop = [body.stop] if isinstance(body.stop, str) else (body.stop or [])
    return SamplingParams(
        max_new_tokens=max_tokens if max_tokens is not None else context_length,
        temperature=temperature,
        top_p=top_p,
        stop=tuple(s for s in stop if s),
        seed=body.seed,
        ignore_eos=bool(body.ignore_eos),
    )


def json_schema_for(body: CommonBody) -> str | None:
    fmt = body.response_format
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return json.dumps({"type": "object"})
    schema = (fmt.json_schema or {}).get("schema")
    if not isinstance(schema, dict):
        raise InvalidRequest("response_format.json_schema.schema must be a JSON Schema object")
    return json.dumps(schema)


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
    if body.echo:
        raise InvalidRequest("echo is not supported by this engine")
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
