"""SGLang's native ``POST /generate``: ``text`` or ``input_ids`` (one, or a batch as lists),
``sampling_params`` (``n`` parallel samples included), ``stream``, ``rid`` and the logprob
fields (see ``native_body.py`` and ``logprob_format.py``).

A batch, or ``n`` > 1, answers a JSON list with ``n`` answers per prompt, prompt after
prompt; streamed, each line carries its answer's ``index`` in that order. ``n`` > 1 first
prefills each prompt once (``Runner.warm``), then its samples reuse that prompt's KV.

Streamed answers are ``data: {json}`` lines with the cumulative ``text`` and ``meta_info``,
then ``data: [DONE]``. Until the final line, ``meta_info.completion_tokens`` counts the text
pieces received so far (a lower bound: the engine streams text, not token ids) and
``cached_tokens`` is 0 (known once the request finishes); logprob lists are cumulative, as
SGLang's. The final line carries the engine's exact counts, ``finish_reason`` and
``e2e_latency`` (seconds from arrival to finish).

``max_new_tokens: 0`` (prefill only) runs one engine step, so the prompt is prefilled and
cached for real, and answers an empty text with ``completion_tokens`` 0 and no output
logprobs.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from engine.base import Engine, GenerateRequest, GenerationStats, LogprobDelta, TextDelta
from engine.server.errors import stream_error
from engine.server.fan_in import cancel_all, fan_in
from engine.server.logprob_format import LogprobLog, TokenTexts, native_logprobs
from engine.server.native_body import GenerateBody, Prompt, parse_body
from engine.server.running import Runner, TrackedStream, check_fits, collect, new_rid
from engine.server.sse import DONE, ClosingStreamingResponse, sse


def finish_reason(stats: GenerationStats, completion_tokens: int) -> dict:
    if stats.finish_reason == "abort":
        return {"type": "abort", "message": "the request was aborted"}
    if stats.finish_reason == "length":
        return {"type": "length", "length": completion_tokens}
    return {"type": "stop", "matched": stats.matched_stop}


@dataclass
class _Answer:
    """One answer of the response: its prompt, stream and what it has produced so far."""

    prompt: Prompt
    stream: TrackedStream
    texts: TokenTexts
    prompt_tokens: int = 0
    text: str = ""
    pieces: int = 0
    log: LogprobLog = field(default_factory=LogprobLog)

    def meta(self) -> dict:
        """``meta_info``: partial until the stream has finished, then final."""
        stats = self.stream.stats
        parsed = self.prompt.sampling
        if stats is None:
            meta = {
                "id": self.stream.rid,
                "finish_reason": None,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.pieces,
                "cached_tokens": 0,
            }
        else:
            completion = 0 if parsed.prefill_only else stats.completion_tokens
            finish = finish_reason(stats, completion)
            if parsed.prefill_only and finish["type"] != "abort":
                finish = {"type": "length", "length": 0}
            meta = {
                "id": self.stream.rid,
                "finish_reason": finish,
                "prompt_tokens": stats.prompt_tokens,
                "completion_tokens": completion,
                "cached_tokens": stats.cached_tokens,
                "e2e_latency": round(self.stream.latency_s, 6),
            }
            if getattr(stats, "speculative", False):  # the embedded engine's speculation
                meta["spec_verify_ct"] = stats.spec_verify_steps  # SGLang's name
                meta["spec_draft_tokens"] = stats.spec_draft_tokens
                meta["spec_accepted_tokens"] = stats.spec_accepted_tokens
        options = self.prompt.logprobs
        if options is not None:
            meta |= native_logprobs(self.log, options, self.texts, output=not parsed.prefill_only)
        return meta

    def body(self, index: int | None) -> dict:
        out = {"text": "" if self.prompt.sampling.prefill_only else self.text}
        out["meta_info"] = self.meta()
        if index is not None:
            out["index"] = index
        return out


def build_native_router(engine: Engine, runner: Runner) -> APIRouter:
    router = APIRouter()

    @router.post("/generate", response_model=None)
    def generate(body: GenerateBody) -> Response:
        info = engine.info()
        prompts, batch = parse_body(body, info.context_length)
        n = prompts[0].sampling.n
        check_fits(n, len(prompts), info.max_requests)
        texts = engine.token_texts if body.return_text_in_logprobs else None
        if n > 1:
            for prompt in prompts:
                runner.warm(_request(prompt, new_rid()))
        wanted = [p for p in prompts for _ in range(n)]
        requests = [_request(p, p.rid if n == 1 and p.rid else new_rid()) for p in wanted]
        streams = runner.start_all(requests)
        # the prompt's length for streamed lines before the final one (counted once a prompt)
        counts = [_prompt_tokens(engine, p) if body.stream else 0 for p in prompts]
        answers = [
            _Answer(p, s, TokenTexts(texts), counts[i // n])
            for i, (p, s) in enumerate(zip(wanted, streams, strict=True))
        ]
        listed = batch or n > 1
        if body.stream:
            lines = _stream_lines(answers, listed)
            return ClosingStreamingResponse(lines, on_disconnect=lambda: cancel_all(streams))
        try:
            for answer in answers:
                result = collect(answer.stream)
                answer.text, answer.log = result.text, result.logprobs
        finally:
            for answer in answers:
                answer.stream.close()
        results = [a.body(None) for a in answers]
        return JSONResponse(results if listed else results[0])

    return router


def _request(prompt: Prompt, rid: str) -> GenerateRequest:
    parsed = prompt.sampling
    return GenerateRequest(
        **prompt.source,
        sampling=parsed.sampling,
        request_id=rid,
        logprobs=prompt.logprobs,
        **parsed.constraints,
    )


def _prompt_tokens(engine: Engine, prompt: Prompt) -> int:
    ids = prompt.source.get("input_ids")
    return len(ids) if ids is not None else engine.count_tokens(prompt.source["prompt"])


def _stream_lines(answers: list[_Answer], listed: bool) -> Generator[str, None, None]:
    items = fan_in([a.stream for a in answers])
    try:
        for index, item in items:
            answer = answers[index]
            if isinstance(item, LogprobDelta):
                answer.log.add(item)
                continue
            if isinstance(item, TextDelta):
                if answer.prompt.sampling.prefill_only or not item.text:
                    continue
                answer.text += item.text
                answer.pieces += 1
            yield sse(answer.body(index if listed else None))
    except Exception as exc:  # never cut a stream without saying why
        yield sse(stream_error(exc, openai=False))
    finally:
        items.close()
        for answer in answers:
            answer.stream.close()
    yield DONE
