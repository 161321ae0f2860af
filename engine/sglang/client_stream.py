"""One streamed SGLang ``/generate`` answer as contract stream items, and SGLang's errors.

``classify`` maps an HTTP status (or an abort's ``status_code``) and message to a contract
error. ``events`` reads ``data: {json}`` lines up to ``data: [DONE]``. ``SGLangStream`` diffs
the cumulative ``text`` into ``TextDelta`` items and ends with one ``Finished`` built from the
last ``meta_info``; closing it before that closes the HTTP response (SGLang sees the
disconnect) and calls ``on_abort(rid)`` (``POST /abort_request``) so the server frees its KV.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from engine.base import (
    EngineBusy,
    EngineError,
    EngineUnavailable,
    Finished,
    GenerateRequest,
    GenerationStats,
    InvalidRequest,
    PromptTooLong,
    StreamItem,
    TextDelta,
)
from engine.sglang.gateway import ROUTED_WORKER_HEADER
from engine.sglang.logprob_reader import LogprobReader
from engine.stream import EngineStream

REPLACEMENT = "\ufffd"  # what a detokenizer shows for a UTF-8 character cut in the middle


def classify(status: int, message: str, retry_after: str | None = None) -> EngineError:
    """An HTTP status (or an abort's ``status_code``) and message as a contract error."""
    if status in (429, 503):
        try:
            wait = float(retry_after) if retry_after else 2.0
        except ValueError:
            wait = 2.0
        return EngineBusy(message or "the engine is busy", retry_after_s=max(wait, 0.1))
    if status == 400:
        low = message.lower()
        if "context" in low or "too long" in low or "longer than" in low:
            return PromptTooLong(message)
        return InvalidRequest(message)
    return EngineError(f"HTTP {status}: {message}")


def error_message(response: httpx.Response) -> str:
    """SGLang's ``{"error": {"message"}}``, OpenAI-style ``{"message"}``, or the raw text."""
    text = response.text
    try:
        body = json.loads(text)
    except ValueError:
        return text.strip()
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and "message" in err:
            return str(err["message"])
        if isinstance(err, str):
            return err
    return text.strip()


def generate_body(
    request: GenerateRequest, rid: str, render_chat: Callable[[tuple[tuple[str, str], ...]], str]
) -> dict[str, Any]:
    """The JSON body of a streamed native ``/generate`` for ``request``."""
    given = [x is not None for x in (request.prompt, request.messages, request.input_ids)]
    if sum(given) != 1:
        raise InvalidRequest("give exactly one of prompt, messages or input_ids")
    s = request.sampling
    body: dict[str, Any] = {
        "rid": rid,
        "stream": True,
        "sampling_params": {
            "max_new_tokens": s.max_new_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "stop": list(s.stop) or None,
            "sampling_seed": s.seed,
            "ignore_eos": s.ignore_eos,
            "json_schema": request.json_schema,
            "regex": request.regex,
            "ebnf": request.ebnf,
            # SGLang's own names and meanings (engine.base.SamplingParams)
            "top_k": s.top_k,
            "min_p": s.min_p,
            "frequency_penalty": s.frequency_penalty,
            "presence_penalty": s.presence_penalty,
            "repetition_penalty": s.repetition_penalty,
            "min_new_tokens": s.min_new_tokens,
        },
    }
    request.constraint()  # at most one, refused here in SGLang's words
    options = request.logprobs
    if options is not None:
        body["return_logprob"] = True
        body["logprob_start_len"] = options.start_len
        body["top_logprobs_num"] = options.top_n
        body["token_ids_logprob"] = list(options.token_ids) or None
    if request.input_ids is not None:
        body["input_ids"] = list(request.input_ids)
    elif request.messages is not None:
        body["text"] = render_chat(request.messages)
    else:
        body["text"] = request.prompt
    return body


def events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """The JSON documents of ``data:`` lines; ends at ``data: [DONE]`` or the body's end."""
    try:
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                return
            event = json.loads(data)
            if isinstance(event, dict):
                yield event
    except httpx.TimeoutException as exc:
        raise EngineUnavailable(f"SGLang stopped answering: {exc}") from exc
    except httpx.TransportError as exc:
        raise EngineUnavailable(f"the SGLang stream broke: {exc}") from exc


def _error_text(error: object) -> str:
    if isinstance(error, dict):
        return str(error.get("message", error))
    return str(error)


def raise_for_error_event(event: dict[str, Any]) -> None:
    """Raise for a first line that refuses the request: an ``error`` line (a 400 in SGLang's
    eyes) or an immediate abort that carries an HTTP ``status_code`` (busy, too long)."""
    if "error" in event:
        error = event["error"]
        status = error.get("code") if isinstance(error, dict) else None
        raise classify(status if isinstance(status, int) else 400, _error_text(error))
    finish = (event.get("meta_info") or {}).get("finish_reason")
    if isinstance(finish, dict) and finish.get("type") == "abort" and not event.get("text"):
        status = finish.get("status_code")
        if isinstance(status, int) and status >= 400:
            raise classify(status, str(finish.get("message", "aborted")))


def stats_from_meta(
    meta: dict[str, Any], ttft_s: float | None, elapsed_s: float, worker: str = ""
) -> GenerationStats:
    finish = meta.get("finish_reason")
    kind = finish.get("type") if isinstance(finish, dict) else finish
    if kind not in ("stop", "length", "abort"):
        raise EngineError(f"unknown finish_reason from SGLang: {finish!r}")
    matched = finish.get("matched") if isinstance(finish, dict) and kind == "stop" else None
    e2e = meta.get("e2e_latency")
    e2e_s = float(e2e) if isinstance(e2e, int | float) else elapsed_s
    return GenerationStats(
        prompt_tokens=int(meta.get("prompt_tokens") or 0),
        cached_tokens=int(meta.get("cached_tokens") or 0),
        completion_tokens=int(meta.get("completion_tokens") or 0),
        ttft_s=min(ttft_s if ttft_s is not None else elapsed_s, e2e_s),
        e2e_s=e2e_s,
        finish_reason=kind,
        matched_stop=matched if isinstance(matched, str | int) else None,
        worker=worker,
    )


class SGLangStream(EngineStream):
    """An iterator of ``StreamItem``; also a context manager. ``close()`` cancels if unfinished;
    the HTTP response is released as soon as the ``Finished`` item is read."""

    def __init__(
        self,
        lines: Iterator[dict[str, Any]],
        response: httpx.Response,
        rid: str,
        started: float,
        on_abort: Callable[[str], object],
    ) -> None:
        self.rid = rid
        self._response = response
        self._on_abort = on_abort
        self._started = started
        super().__init__(self._parse(lines))

    def _on_finished(self) -> None:
        self.close()

    def _release(self, finished: bool) -> None:
        try:
            self._response.close()
        finally:
            if not finished:
                self._on_abort(self.rid)

    def _parse(self, lines: Iterator[dict[str, Any]]) -> Iterator[StreamItem]:
        sent = ""
        ttft: float | None = None
        meta: dict[str, Any] = {}
        logprobs = LogprobReader()
        for index, event in enumerate(lines):
            if index == 0:
                raise_for_error_event(event)
            if "error" in event:
                # the server (or the gateway, when the worker under it died) gave up on the
                # answer: for the reader, the engine became unavailable mid-answer
                raise EngineUnavailable(
                    f"the engine stopped mid-answer: {_error_text(event['error'])}"
                )
            meta = event.get("meta_info") or meta
            yield from logprobs.read(meta)
            text = str(event.get("text") or "")
            if not meta.get("finish_reason"):
                text = text.rstrip(REPLACEMENT)  # hold back a cut character until it is whole
            if len(text) > len(sent):
                delta, sent = text[len(sent) :], text
                if ttft is None:
                    ttft = time.perf_counter() - self._started
                yield TextDelta(delta)
        if not meta.get("finish_reason"):
            raise EngineUnavailable("the SGLang stream ended without a finish reason")
        # behind smg, the answer's header names the worker that served it
        worker = self._response.headers.get(ROUTED_WORKER_HEADER, "")[:512].rstrip("/")
        elapsed = time.perf_counter() - self._started
        yield Finished(stats_from_meta(meta, ttft, elapsed, worker))
