"""SGLang's ``sampling_params`` checked and turned into the engine's ``SamplingParams``.

Defaults follow SGLang (``max_new_tokens`` 128, ``temperature`` 1.0); an explicit ``null``
means the default. Unknown keys are refused. Parameters the engine cannot honour are accepted
only at their neutral value (e.g. ``repetition_penalty`` 1.0) and refused otherwise, so a
client never silently gets different sampling from what it asked for. ``stream_interval``
(how often SGLang flushes a stream) is accepted and ignored: it does not change the output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.base import InvalidRequest, SamplingParams

DEFAULT_MAX_NEW_TOKENS = 128
TOP_K_ALL = 1 << 30  # SGLang's "whole vocabulary"

HANDLED = frozenset(
    {
        "max_new_tokens", "temperature", "top_p", "top_k", "stop", "stop_token_ids",
        "ignore_eos", "json_schema", "sampling_seed", "stream_interval", "n",
    }
)  # fmt: skip
NEUTRAL: dict[str, tuple[object, ...]] = {
    "min_p": (0, 0.0),
    "frequency_penalty": (0, 0.0),
    "presence_penalty": (0, 0.0),
    "repetition_penalty": (1, 1.0),
    "min_new_tokens": (0,),
    "skip_special_tokens": (True,),
    "spaces_between_special_tokens": (True,),
    "no_stop_trim": (False,),
    "regex": (),
    "ebnf": (),
    "structural_tag": (),
    "stop_regex": ("", ()),
    "custom_params": ((),),
    "logit_bias": ((),),
}


@dataclass(frozen=True)
class ParsedSampling:
    sampling: SamplingParams
    json_schema: str | None
    prefill_only: bool  # max_new_tokens was 0
    max_new_tokens: int  # as asked (0 for prefill only)


def _number(params: dict, key: str, default: float) -> float:
    value = params.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidRequest(f"sampling_params.{key} must be a finite number")
    return float(value)


def _int(params: dict, key: str) -> int | None:
    value = params.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(f"sampling_params.{key} must be an integer")
    return value


def _stops(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value else ()
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return tuple(s for s in value if s)
    raise InvalidRequest("stop must be a string, a list of strings or null")


def _check_neutral(params: dict) -> None:
    for key, neutral in NEUTRAL.items():
        value = params.get(key)
        if value is None or value in neutral or (isinstance(value, list | dict) and not value):
            continue
        if key in ("regex", "ebnf", "structural_tag", "stop_regex"):
            raise InvalidRequest(f"sampling_params.{key} is not supported (use json_schema)")
        raise InvalidRequest(f"sampling_params.{key}={value!r} is not supported by this engine")


def top_k_is_greedy(top_k: int | None) -> bool:
    """``top_k`` -1, 0 or null (disabled) and 1 (greedy) can be honoured; others cannot."""
    if top_k is None or top_k in (-1, 0) or top_k >= TOP_K_ALL:
        return False
    if top_k == 1:
        return True
    raise InvalidRequest(f"top_k={top_k} is not supported: use -1 (disabled) or 1 (greedy)")


def parse_sampling(
    params: object, default_max_new_tokens: int | None, context_length: int
) -> ParsedSampling:
    """``max_new_tokens`` None (or a None default) means: up to the end of the context."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise InvalidRequest("sampling_params must be an object")
    unknown = sorted(set(params) - HANDLED - set(NEUTRAL))
    if unknown:
        raise InvalidRequest(f"unknown sampling_params: {', '.join(unknown)}")
    _check_neutral(params)
    if (_int(params, "n") or 1) != 1:
        raise InvalidRequest("sampling_params.n: only n=1 is supported")
    if params.get("stop_token_ids"):
        raise InvalidRequest("sampling_params.stop_token_ids is not supported by this engine")
    _int(params, "stream_interval")

    max_new = _int(params, "max_new_tokens")
    if "max_new_tokens" not in params:
        max_new = default_max_new_tokens
    if max_new is not None and max_new < 0:
        raise InvalidRequest("sampling_params.max_new_tokens must be at least 0")
    temperature = _number(params, "temperature", 1.0)
    if temperature < 0:
        raise InvalidRequest("sampling_params.temperature must be non-negative")
    top_p = _number(params, "top_p", 1.0)
    if not 0.0 < top_p <= 1.0:
        raise InvalidRequest("sampling_params.top_p must be in (0, 1]")
    if top_k_is_greedy(_int(params, "top_k")):
        temperature = 0.0
    ignore_eos = params.get("ignore_eos")
    if ignore_eos is not None and not isinstance(ignore_eos, bool):
        raise InvalidRequest("sampling_params.ignore_eos must be a boolean")
    schema = params.get("json_schema")
    if schema is not None and not isinstance(schema, str):
        raise InvalidRequest("sampling_params.json_schema must be a string (JSON text)")

    prefill_only = max_new == 0
    sampling = SamplingParams(
        # prefill only runs one step (the engine generates at least one token) and drops it
        max_new_tokens=1 if prefill_only else (max_new if max_new is not None else context_length),
        temperature=temperature,
        top_p=top_p,
        stop=() if prefill_only else _stops(params.get("stop")),
        seed=_int(params, "sampling_seed"),
        ignore_eos=bool(ignore_eos),
    )
    return ParsedSampling(sampling, schema, prefill_only, max_new or 0)
