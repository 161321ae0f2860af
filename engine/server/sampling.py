"""SGLang's ``sampling_params`` checked and turned into the engine's ``SamplingParams``.

Defaults follow SGLang (``max_new_tokens`` 128, ``temperature`` 1.0, ``top_k`` -1, ``min_p``
0, penalties off); an explicit ``null`` means the default, and out-of-range values are refused
with SGLang's own messages (``engine.base.sampling_problem``). Unknown keys are refused.
Parameters the engine cannot honour are accepted only at their neutral value and refused
otherwise, so a client never silently gets different sampling from what it asked for.
At most one of the constraints ``json_schema``, ``regex`` and ``ebnf`` is set. ``n`` asks for
parallel samples of the prompt (the route runs them; the prompt is prefilled once).
``stream_interval`` (how often SGLang flushes a stream) is accepted and ignored: it does not
change the output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from engine.base import (
    MANY_CONSTRAINTS,
    TOP_K_ALL,
    InvalidRequest,
    SamplingParams,
    sampling_problem,
)

DEFAULT_MAX_NEW_TOKENS = 128
MAX_N = 64  # parallel samples of one prompt (each is a request in the engine's queue)
TOP_K_WHOLE = 1 << 30  # SGLang's other spelling of "the whole vocabulary"

HANDLED = frozenset(
    {
        "max_new_tokens", "temperature", "top_p", "top_k", "stop", "stop_token_ids",
        "ignore_eos", "json_schema", "regex", "ebnf", "sampling_seed", "stream_interval", "n",
        "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens",
    }
)  # fmt: skip
NEUTRAL: dict[str, tuple[object, ...]] = {
    "skip_special_tokens": (True,),
    "spaces_between_special_tokens": (True,),
    "no_stop_trim": (False,),
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
    regex: str | None = None
    ebnf: str | None = None
    n: int = 1  # parallel samples of one prompt

    @property
    def constraints(self) -> dict[str, str | None]:
        """The output constraint as ``GenerateRequest`` keyword arguments."""
        return {"json_schema": self.json_schema, "regex": self.regex, "ebnf": self.ebnf}


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
        if key in ("structural_tag", "stop_regex"):
            raise InvalidRequest(
                f"sampling_params.{key} is not supported by this engine "
                "(json_schema, regex and ebnf are)"
            )
        raise InvalidRequest(f"sampling_params.{key}={value!r} is not supported by this engine")


def top_k_value(top_k: int | None) -> int:
    """SGLang's ``top_k``: null and -1 (or 1 << 30 and above) mean the whole vocabulary."""
    if top_k is None or top_k >= TOP_K_WHOLE:
        return TOP_K_ALL
    return top_k


def checked(sampling: SamplingParams) -> SamplingParams:
    """``sampling``, or ``InvalidRequest`` with SGLang's message for its first bad value."""
    problem = sampling_problem(sampling)
    if problem:
        raise InvalidRequest(problem)
    return sampling


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
    n = _int(params, "n")
    n = 1 if n is None else n
    if not 1 <= n <= MAX_N:
        raise InvalidRequest(f"sampling_params.n must be in [1, {MAX_N}], got {n}")
    if params.get("stop_token_ids"):
        raise InvalidRequest("sampling_params.stop_token_ids is not supported by this engine")
    _int(params, "stream_interval")

    max_new = _int(params, "max_new_tokens")
    if "max_new_tokens" not in params:
        max_new = default_max_new_tokens
    if max_new is not None and max_new < 0:
        raise InvalidRequest("sampling_params.max_new_tokens must be at least 0")
    temperature = _number(params, "temperature", 1.0)
    top_p = _number(params, "top_p", 1.0)
    ignore_eos = params.get("ignore_eos")
    if ignore_eos is not None and not isinstance(ignore_eos, bool):
        raise InvalidRequest("sampling_params.ignore_eos must be a boolean")
    grammars = {key: params.get(key) for key in ("json_schema", "regex", "ebnf")}
    for key, value in grammars.items():
        if value is not None and not isinstance(value, str):
            raise InvalidRequest(f"sampling_params.{key} must be a string")
        grammars[key] = value or None  # an empty string is unset, as in SGLang
    given = [key for key, value in grammars.items() if value is not None]
    if len(given) > 1:
        raise InvalidRequest(f"{MANY_CONSTRAINTS} Got {', '.join(given)}.")

    prefill_only = max_new == 0
    asked = SamplingParams(
        max_new_tokens=max_new if max_new is not None else context_length,
        temperature=temperature,
        top_p=top_p,
        stop=() if prefill_only else _stops(params.get("stop")),
        seed=_int(params, "sampling_seed"),
        ignore_eos=bool(ignore_eos),
        top_k=top_k_value(_int(params, "top_k")),
        min_p=_number(params, "min_p", 0.0),
        frequency_penalty=_number(params, "frequency_penalty", 0.0),
        presence_penalty=_number(params, "presence_penalty", 0.0),
        repetition_penalty=_number(params, "repetition_penalty", 1.0),
        min_new_tokens=_int(params, "min_new_tokens") or 0,
    )
    checked(asked)
    # prefill only runs one step (the engine generates at least one token) and drops it
    sampling = replace(asked, max_new_tokens=1) if prefill_only else asked
    return ParsedSampling(
        sampling,
        grammars["json_schema"],
        prefill_only,
        max_new or 0,
        regex=grammars["regex"],
        ebnf=grammars["ebnf"],
        n=n,
    )
