"""The OpenAI API: ``POST /v1/chat/completions``, ``POST /v1/completions``, ``GET /v1/models``.

Shapes follow OpenAI (and SGLang's implementation of it), so the official ``openai`` client
works unchanged. ``usage.prompt_tokens_details.cached_tokens`` is always reported (SGLang's
``--enable-cache-report``). Streaming usage (``stream_options.include_usage``): chat sends it
in a last chunk with empty ``choices``, as OpenAI specifies; completions send it on the final
chunk, so that every completions chunk carries ``choices[0].text`` (SGLang's benchmark
client reads it on every chunk).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from engine.base import Engine, GenerateRequest, GenerationStats, InvalidRequest, TextDelta
from engine.server.errors import stream_error
from engine.server.openai_schema import (
    COMPLETIONS_DEFAULT_MAX_TOKENS,
    ChatBody,
    CommonBody,
    CompletionBody,
    chat_messages,
    completion_prompts,
    json_schema_for,
    sampling_for,
)
from engine.server.running import Runner, TrackedStream, collect, new_rid
from engine.server.sse import DONE, ClosingStreamingResponse, sse


def usage(stats: list[GenerationStats]) -> dict:
    prompt = sum(s.prompt_tokens for s in stats)
    completion = sum(s.completion_tokens for s in stats)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": sum(s.cached_tokens for s in stats)},
    }


@dataclass(frozen=True)
class _Shape:
    """How one endpoint's objects look: chat (``delta``/``message``) or text completions."""

    obj: str
    chunk_obj: str
    chat: bool

    def choice(self, index: int, text: str, finish: str | None) -> dict:
        message = {"role": "assistant", "content": text}
        body = {"message": message} if self.chat else {"text": text}
        return {"index": index, **body, "logprobs": None, "finish_reason": finish}

    def chunk_choice(self, text: str | None, finish: str | None, first: bool = False) -> dict:
        if not self.chat:
            return {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}
        delta: dict[str, str] = {"role": "assistant", "content": ""} if first else {}
        if text:
            delta["content"] = text
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}


CHAT = _Shape("chat.completion", "chat.completion.chunk", chat=True)
TEXT = _Shape("text_completion", "text_completion", chat=False)


def _stream_lines(
    stream: TrackedStream, shape: _Shape, model: str, include_usage: bool
) -> Generator[str, None, None]:
    created = int(time.time())

    def chunk(choices: list[dict], **extra: Any) -> str:
        head = {"id": stream.rid, "object": shape.chunk_obj, "created": created, "model": model}
        return sse({**head, "choices": choices, **extra})

    no_usage = {"usage": None} if include_usage else {}
    try:
        if shape.chat:
            yield chunk([shape.chunk_choice(None, None, first=True)], **no_usage)
        for item in stream:
            if isinstance(item, TextDelta):
                if item.text:
                    yield chunk([shape.chunk_choice(item.text, None)], **no_usage)
                continue
            last = [shape.chunk_choice(None, item.stats.finish_reason)]
            if shape.chat:
                yield chunk(last, **no_usage)
                if include_usage:
                    yield chunk([], usage=usage([item.stats]))
            else:
                yield chunk(last, **({"usage": usage([item.stats])} if include_usage else {}))
    except Exception as exc:  # never cut a stream without saying why
        yield sse(stream_error(exc, openai=True))
    finally:
        stream.close()
    yield DONE


def build_openai_router(
    engine: Engine, runner: Runner, served_model_name: str, clock: Callable[[], float] = time.time
) -> APIRouter:
    router = APIRouter(prefix="/v1")
    created_at = int(clock())

    def serve(
        body: CommonBody, shape: _Shape, inputs: list[dict[str, Any]], max_tokens: int | None
    ) -> Response:
        context = engine.info().context_length
        sampling = sampling_for(body, max_tokens, context)
        schema = json_schema_for(body)
        model = body.model or served_model_name
        if body.stream and len(inputs) > 1:
            raise InvalidRequest("streaming several prompts is not supported")
        rid = body.rid or new_rid()
        requests = [
            GenerateRequest(
                **item,
                sampling=sampling,
                request_id=rid if len(inputs) == 1 else f"{rid}-{i}",
                json_schema=schema,
            )
            for i, item in enumerate(inputs)
        ]
        if body.stream:
            stream = runner.start(requests[0])
            lines = _stream_lines(stream, shape, model, body.include_usage)
            return ClosingStreamingResponse(lines, on_disconnect=stream.cancel)
        streams = runner.start_all(requests)
        try:
            results = [collect(s) for s in streams]
        finally:
            for s in streams:
                s.close()
        choices = [shape.choice(i, r.text, r.stats.finish_reason) for i, r in enumerate(results)]
        answer = {
            "id": rid,
            "object": shape.obj,
            "created": int(clock()),
            "model": model,
            "choices": choices,
            "usage": usage([r.stats for r in results]),
        }
        return JSONResponse(answer)

    @router.post("/chat/completions", response_model=None)
    def chat_completions(body: ChatBody) -> Response:
        messages = chat_messages(body)
        max_tokens = body.max_completion_tokens
        if max_tokens is None:
            max_tokens = body.max_tokens
        return serve(body, CHAT, [{"messages": messages}], max_tokens)

    @router.post("/completions", response_model=None)
    def completions(body: CompletionBody) -> Response:
        inputs = completion_prompts(body)
        max_tokens = COMPLETIONS_DEFAULT_MAX_TOKENS if body.max_tokens is None else body.max_tokens
        return serve(body, TEXT, inputs, max_tokens)

    @router.get("/models")
    def models() -> dict:
        card = {
            "id": served_model_name,
            "object": "model",
            "created": created_at,
            "owned_by": "appliance",
            "root": served_model_name,
            "max_model_len": engine.info().context_length,
        }
        return {"object": "list", "data": [card]}

    return router
