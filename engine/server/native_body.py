"""SGLang's ``GenerateReqInput`` body for ``POST /generate``, checked and expanded into one
``Prompt`` per prompt of the body (a single prompt, or a batch given as lists).

Per-prompt fields (``sampling_params``, ``rid``, ``return_logprob``, ``logprob_start_len``,
``top_logprobs_num``, ``token_ids_logprob``) take a list with one entry per prompt, or one
value for all of them; ``return_text_in_logprobs`` is one flag for the whole body.
``sampling_params.n`` must be the same for every prompt of a batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from engine.base import InvalidRequest, LogprobOptions
from engine.server.sampling import DEFAULT_MAX_NEW_TOKENS, ParsedSampling, parse_sampling


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
    token_ids_logprob: list[int] | list[list[int]] | None = None
    return_text_in_logprobs: bool | None = False
    lora_path: str | list[str | None] | None = None
    image_data: Any = None
    video_data: Any = None
    audio_data: Any = None


@dataclass(frozen=True)
class Prompt:
    """One prompt of the body: what to generate from, how, and which logprobs to report."""

    source: dict[str, Any]  # GenerateRequest keyword arguments: prompt or input_ids
    sampling: ParsedSampling
    rid: str | None
    logprobs: LogprobOptions | None


def parse_body(body: GenerateBody, context_length: int) -> tuple[list[Prompt], bool]:
    """The body's prompts, and whether it is a batch (answered with a JSON list)."""
    _refuse_unsupported(body)
    sources, batch = _sources(body)
    n = len(sources)
    params = _per_item(body.sampling_params, n, "sampling_params", batch)
    parsed = [parse_sampling(p, DEFAULT_MAX_NEW_TOKENS, context_length) for p in params]
    if len({p.n for p in parsed}) > 1:
        raise InvalidRequest(
            "The parallel_sample_num should be the same for all samples in sample params."
        )
    rids = _per_item(body.rid, n, "rid", batch)
    logprobs = _logprob_options(body, [p.prefill_only for p in parsed], batch)
    prompts = [
        Prompt(source, p, rid, lp)
        for source, p, rid, lp in zip(sources, parsed, rids, logprobs, strict=True)
    ]
    return prompts, batch


def _refuse_unsupported(body: GenerateBody) -> None:
    def on(value: object) -> bool:
        return any(value) if isinstance(value, list) else bool(value)

    if on(body.lora_path):
        raise InvalidRequest("lora_path is not supported by this engine (must be null)")
    for name in ("image_data", "video_data", "audio_data"):
        if on(getattr(body, name)):
            raise InvalidRequest(f"{name} is not supported: this is a text-only model")


def _sources(body: GenerateBody) -> tuple[list[dict[str, Any]], bool]:
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


def _token_ids(value: list[int] | list[list[int]] | None, n: int, batch: bool) -> list[Any]:
    """``token_ids_logprob`` per prompt: one flat list for all, or (a batch) one per prompt."""
    if not value:
        return [None] * n
    if all(isinstance(x, int) for x in value):
        return [tuple(value)] * n  # type: ignore[arg-type]
    if not batch or len(value) != n:
        raise InvalidRequest("token_ids_logprob must be a flat list of integers.")
    return [tuple(row) if row else None for row in value]  # type: ignore[union-attr]


def _logprob_options(
    body: GenerateBody, prefill_only: list[bool], batch: bool
) -> list[LogprobOptions | None]:
    """Each prompt's logprob options. ``logprob_start_len`` left out means -1 (none of the
    prompt), except for prefill-only scoring (``max_new_tokens`` 0), where it means 0: the
    whole prompt (SGLang would answer empty lists there, and its frontend's
    unconditional-likelihood ``select`` sends exactly that request and reads the prompt's)."""
    n = len(prefill_only)
    wanted = _per_item(body.return_logprob, n, "return_logprob", batch)
    starts = _per_item(body.logprob_start_len, n, "logprob_start_len", batch)
    tops = _per_item(body.top_logprobs_num, n, "top_logprobs_num", batch)
    ids = _token_ids(body.token_ids_logprob, n, batch)
    out: list[LogprobOptions | None] = []
    for want, start, top, asked, scoring in zip(
        wanted, starts, tops, ids, prefill_only, strict=True
    ):
        if not want:
            out.append(None)
            continue
        if top is not None and top < 0:
            raise InvalidRequest(f"top_logprobs_num must be at least 0, got {top}.")
        if start is None:
            start = 0 if scoring else -1
        out.append(LogprobOptions(start_len=start, top_n=top or 0, token_ids=asked or ()))
    return out
