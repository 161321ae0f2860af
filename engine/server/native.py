"""SGLang's native ``POST /generate``: ``text`` or ``input_ids`` (one, or a batch as lists),
``sampling_params``, ``stream``, ``rid``.

Streamed answers are ``data: {json}`` lines with the cumulative ``text`` and ``meta_info``,
then ``data: [DONE]``. Until the final line, ``meta_info.completion_tokens`` counts the text
pieces received so far (a lower bound: the engine streams text, not token ids) and
``cached_tokens`` is 0 (known once the request finishes); the final line carries the engine's
exact counts, ``finish_reason`` and ``e2e_latency`` (seconds from arrival to finish).

``max_new_tokens: 0`` (prefill only) runs one engine step, so the prompt is prefilled and
cached for real, and answers an empty text with ``completion_tokens`` 0.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict

from engine.base import Engine, GenerateRequest, GenerationStats, InvalidRequest, TextDelta
from engine.server.errors import stream_error
from engine.server.running import Runner, TrackedStream, collect, new_rid
from engine.server.sampling import (
    DEFAULT_MAX_NEW_TOKENS,
    ParsedSampling,
    parse_sampling,
)
from engine.server.sse import DONE, ClosingStreamingResponse, sse


class GenerateBody(BaseModel):
    """SGLang's ``GenerateReqInput``; other top-level fields are ignored, as SGLang does."""

    model_config = ConfigDict(extra="ignore")

    text: str | list[str] | None = None
    input_ids: list[int] | list[list[int]] | None = None
    sampling_params: dict[str, Any] | list[dict[str, Any]] | None = None
    stream: bool | None = False
    rid: str | list[str] | None = None
    return_logprob: bool | list[bool] | None = None
    logprob_start_len: int | list[int] | None = None
    top_logprobs_num: int | list[int] | None = None
    lora_path: str | list[str | None] | None = None
    image_data: Any = None
    video_data: Any = None
    audio_data: Any = None


def finish_reason(stats: GenerationStats, completion_tokens: int) -> dict:
    if stats.finish_reason == "abort":
        return {"type": "abort", "message": "the request was aborted"}
    if stats.finish_reason == "length":
        return {"type": "length", "length": completion_tokens}
    return {"type": "stop", "matched": stats.matched_stop}


def final_meta(stream: TrackedStream, parsed: ParsedSampling) -> dict:
    stats = stream.stats
    assert stats is not None
    completion = 0 if parsed.prefill_only else stats.completion_tokens
    finish = finish_reason(stats, completion)
    if parsed.prefill_only and finish["type"] != "abort":
        finish = {"type": "length", "length": 0}
    return {
        "id": stream.rid,
        "finish_reason": finish,
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": completion,
        "cached_tokens": stats.cached_tokens,
        "e2e_latency": round(stream.latency_s, 6),
    }


def _refuse_unsupported(body: GenerateBody) -> None:
    def on(value: object) -> bool:
        return any(value) if isinstance(value, list) else bool(value)

    if on(body.return_logprob):
        raise InvalidRequest("return_logprob is not supported by this engine")
    if on(body.lora_path):
        raise InvalidRequest("lora_path is not supported by this engine (must be null)")
    for name in ("image_data", "video_data", "audio_data"):
        if on(getattr(body, name)):
            raise InvalidRequest(f"{name} is not supported: this is a text-only model")


def _inputs(body: GenerateBody) -> tuple[list[dict[str, Any]], bool]:
    """Each prompt as GenerateRequest keyword arguments, and whether the body is a batch."""
    if (body.text is None) == (body.input_ids is None):
        raise InvalidRequest("give exactly one of text or input_ids")
    if body.text is not None:
        batch = isinstance(body.text, list)
        texts = body.text if isinstance(body.text, list) else [body.text]
        items: list[dict[str, Any]] = [{"prompt": t} for t in texts]
    else:
        ids = body.input_ids or []
        batch = bool(ids) and isinstance(ids[0], list)
        rows = ids if batch else [ids]
        items = [{"input_ids": tuple(row)} for row in rows]  # type: ignore[arg-type]
    if not items:
        raise InvalidRequest("the batch is empty")
    return items, batch


def _per_item(value: Any, n: int, name: str, batch: bool) -> list[Any]:
    if not batch:
        if isinstance(value, list):
            raise InvalidRequest(f"{name} must not be a list for a single prompt")
        return [value]
    if isinstance(value, list):
        if len(value) != n:
            raise InvalidRequest(f"{name} has {len(value)} entries for {n} prompts")
        return value
    if name == "rid" and value is not None:
        raise InvalidRequest("rid must be a list with one id per prompt for a batch")
    return [value] * n


def build_native_router(engine: Engine, runner: Runner) -> APIRouter:
    router = APIRouter()

    @router.post("/generate", response_model=None)
    def generate(body: GenerateBody) -> Response:
        _refuse_unsupported(body)
        items, batch = _inputs(body)
        if batch and body.stream:
            raise InvalidRequest("streaming a batch is not supported; send one prompt per request")
        n = len(items)
        context = engine.info().context_length
        params = _per_item(body.sampling_params, n, "sampling_params", batch)
        parsed = [parse_sampling(p, DEFAULT_MAX_NEW_TOKENS, context) for p in params]
        rids = [rid or new_rid() for rid in _per_item(body.rid, n, "rid", batch)]
        requests = [
            GenerateRequest(**item, sampling=p.sampling, request_id=rid, json_schema=p.json_schema)
            for item, p, rid in zip(items, parsed, rids, strict=True)
        ]
        if body.stream:
            item = items[0]
            ids = item.get("input_ids")
            prompt_tokens = len(ids) if ids is not None else engine.count_tokens(item["prompt"])
            stream = runner.start(requests[0])
            lines = _stream_lines(stream, parsed[0], prompt_tokens)
            return ClosingStreamingResponse(lines, on_disconnect=stream.cancel)
        streams = runner.start_all(requests)
        try:
            results = [_answer(s, p) for s, p in zip(streams, parsed, strict=True)]
        finally:
            for s in streams:
                s.close()
        return JSONResponse(results if batch else results[0])

    return router


def _answer(stream: TrackedStream, parsed: ParsedSampling) -> dict:
    result = collect(stream)
    text = "" if parsed.prefill_only else result.text
    return {"text": text, "meta_info": final_meta(stream, parsed)}


def _stream_lines(
    stream: TrackedStream, parsed: ParsedSampling, prompt_tokens: int
) -> Generator[str, None, None]:
    text, pieces = "", 0
    try:
        for item in stream:
            if isinstance(item, TextDelta):
                if parsed.prefill_only or not item.text:
                    continue
                text += item.text
                pieces += 1
                meta = {
                    "id": stream.rid,
                    "finish_reason": None,
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": pieces,
                    "cached_tokens": 0,
                }
                yield sse({"text": text, "meta_info": meta})
            else:
                yield sse({"text": text, "meta_info": final_meta(stream, parsed)})
    except Exception as exc:  # never cut a stream without saying why
        yield sse(stream_error(exc, openai=False))
    finally:
        stream.close()
    yield DONE
