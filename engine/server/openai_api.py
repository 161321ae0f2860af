"""The OpenAI API: ``POST /v1/chat/completions``, ``POST /v1/completions``, ``GET /v1/models``.

Shapes follow OpenAI (and SGLang's implementation of it), so the official ``openai`` client
works unchanged. ``usage.prompt_tokens_details.cached_tokens`` is always reported (SGLang's
``--enable-cache-report``). Streaming usage (``stream_options.include_usage``): chat sends it
in a last chunk with empty ``choices``, as OpenAI specifies; completions send it on the final
chunk, so that every completions chunk carries ``choices[0].text`` (SGLang's benchmark
client reads it on every chunk).

``n`` > 1 answers ``n`` choices per prompt (completions: prompt after prompt, index
``prompt * n + sample``); each prompt is prefilled once first (``Runner.warm``). Logprobs are
in ``openai_logprobs.py``'s shapes; streamed, each chunk holds those of its new tokens.
Completions' ``echo`` puts the prompt before the answer (streamed: in a first chunk), and
with ``logprobs`` the prompt's tokens before the answer's (the first without a logprob).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import replace
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from engine.base import (
    Engine,
    GenerateRequest,
    GenerationStats,
    InvalidRequest,
    LogprobDelta,
    TextDelta,
    TokenLogprob,
)
from engine.server.errors import stream_error
from engine.server.fan_in import cancel_all, fan_in
from engine.server.logprob_format import TokenTexts
from engine.server.openai_schema import (
    COMPLETIONS_DEFAULT_MAX_TOKENS,
    ChatBody,
    CommonBody,
    CompletionBody,
    chat_messages,
    completion_prompts,
    constraint_for,
    logprobs_for,
    sampling_for,
)
from engine.server.openai_shapes import CHAT, TEXT, Shape
from engine.server.running import Runner, TrackedStream, check_fits, collect, new_rid
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


def _stream_lines(
    streams: list[TrackedStream],
    shape: Shape,
    model: str,
    rid: str,
    include_usage: bool,
    logprobs: Callable[[list[TokenLogprob]], dict] | None,
    echoes: list[str] | None,
) -> Generator[str, None, None]:
    """``echoes``: each stream's prompt text, sent first (completions' ``echo``), with the
    prompt's logprobs when they were asked for."""
    created = int(time.time())
    pending: list[list[TokenLogprob]] = [[] for _ in streams]  # logprobs not sent yet
    finished: list[GenerationStats] = []

    def chunk(choices: list[dict], **extra: Any) -> str:
        head = {"id": rid, "object": shape.chunk_obj, "created": created, "model": model}
        return sse({**head, "choices": choices, **extra})

    def take_logprobs(index: int) -> dict | None:
        if logprobs is None or not pending[index]:
            return None
        entries, pending[index] = pending[index], []
        return logprobs(entries)

    no_usage = {"usage": None} if include_usage else {}
    items = fan_in(streams)
    try:
        if shape.chat:
            for index in range(len(streams)):
                yield chunk([shape.chunk_choice(index, None, None, first=True)], **no_usage)
        if echoes is not None and logprobs is None:
            for index, echo in enumerate(echoes):
                yield chunk([shape.chunk_choice(index, echo, None)], **no_usage)
        for index, item in items:
            if isinstance(item, LogprobDelta) and item.prompt and echoes is not None:
                lp = logprobs(list(item.tokens)) if logprobs is not None else None
                yield chunk([shape.chunk_choice(index, echoes[index], None, lp)], **no_usage)
            elif isinstance(item, LogprobDelta):
                pending[index] += item.tokens
            elif isinstance(item, TextDelta):
                if item.text:
                    lp = take_logprobs(index)
                    yield chunk([shape.chunk_choice(index, item.text, None, lp)], **no_usage)
            else:
                finished.append(item.stats)
                lp = take_logprobs(index)
                last = [shape.chunk_choice(index, None, item.stats.finish_reason, lp)]
                done = len(finished) == len(streams)
                if shape.chat or not (done and include_usage):
                    yield chunk(last, **no_usage)
                else:  # completions: usage rides on the final chunk
                    yield chunk(last, usage=usage(finished))
        if shape.chat and include_usage:
            yield chunk([], usage=usage(finished))
    except Exception as exc:  # never cut a stream without saying why
        yield sse(stream_error(exc, openai=True))
    finally:
        items.close()
        for stream in streams:
            stream.close()
    yield DONE


def build_openai_router(
    engine: Engine, runner: Runner, served_model_name: str, clock: Callable[[], float] = time.time
) -> APIRouter:
    router = APIRouter(prefix="/v1")
    created_at = int(clock())

    def serve(
        body: CommonBody,
        shape: Shape,
        inputs: list[dict[str, Any]],
        max_tokens: int | None,
        echo: bool = False,
    ) -> Response:
        info = engine.info()
        sampling = sampling_for(body, max_tokens, info.context_length)
        constraint = constraint_for(body)
        options = logprobs_for(body)
        model = body.model or served_model_name
        n = body.n or 1
        if body.stream and len(inputs) > 1:
            raise InvalidRequest("streaming several prompts is not supported")
        check_fits(n, len(inputs), info.max_requests)
        rid = body.rid or new_rid()
        prompts = [
            GenerateRequest(**item, sampling=sampling, logprobs=options, **constraint)
            for item in inputs
        ]
        if n > 1:
            for prompt in prompts:
                runner.warm(prompt)
        single = len(prompts) == 1 and n == 1
        requests = [
            replace(p, request_id=rid if single else f"{rid}-{i * n + j}")
            for i, p in enumerate(prompts)
            for j in range(n)
        ]
        echoes = None
        if echo:  # each prompt's text (decoded once), for each of its samples
            texts = [_prompt_text(engine, item) for item in inputs]
            echoes = [text for text in texts for _ in range(n)]
        streams = runner.start_all(requests)
        raw = TokenTexts(engine.token_bytes)
        lp_shape = shape.logprobs(raw, options) if options is not None else None
        if body.stream:
            lines = _stream_lines(streams, shape, model, rid, body.include_usage, lp_shape, echoes)
            return ClosingStreamingResponse(lines, on_disconnect=lambda: cancel_all(streams))
        try:
            results = [collect(s) for s in streams]
        finally:
            for s in streams:
                s.close()
        choices = [
            shape.choice(
                i,
                (echoes[i] if echoes else "") + r.text,
                r.stats.finish_reason,
                lp_shape(r.logprobs.prompt + r.logprobs.output) if lp_shape is not None else None,
            )
            for i, r in enumerate(results)
        ]
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
        return serve(body, TEXT, inputs, max_tokens, echo=bool(body.echo))

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


def _prompt_text(engine: Engine, item: dict[str, Any]) -> str:
    """A completions prompt as text: as given, or its token ids' bytes decoded."""
    if "prompt" in item:
        return item["prompt"]
    return b"".join(engine.token_bytes(list(item["input_ids"]))).decode("utf-8", "replace")
