"""SGLang's ``meta_info`` logprob lists, read from a streamed ``/generate`` as contract items.

SGLang's lists are cumulative in every line (``input_token_logprobs`` in full,
``output_token_logprobs`` so far, with their ``*_top_logprobs`` and ``*_token_ids_logprobs``
beside them; entries are ``[logprob, token_id, text]``). ``LogprobReader`` hands out the
prompt's entries once and then each output entry once, as ``LogprobDelta`` items.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from engine.base import LogprobDelta, TokenLogprob


def _pairs(row: Any) -> tuple[tuple[int, float], ...]:
    if not row:
        return ()
    return tuple((int(entry[1]), float(entry[0])) for entry in row if entry[0] is not None)


def _entries(meta: dict[str, Any], side: str, start: int) -> list[TokenLogprob]:
    tokens = meta.get(f"{side}_token_logprobs") or []
    tops = meta.get(f"{side}_top_logprobs") or []
    asked = meta.get(f"{side}_token_ids_logprobs") or []
    out = []
    for i in range(start, len(tokens)):
        logprob, token_id = tokens[i][0], int(tokens[i][1])
        top = _pairs(tops[i]) if i < len(tops) else ()
        ids = _pairs(asked[i]) if i < len(asked) else ()
        out.append(TokenLogprob(token_id, None if logprob is None else float(logprob), top, ids))
    return out


class LogprobReader:
    """Turns one stream's cumulative logprob lists into new ``LogprobDelta`` items."""

    def __init__(self) -> None:
        self._prompt_sent = False
        self._outputs = 0

    def read(self, meta: dict[str, Any]) -> Iterator[LogprobDelta]:
        if not self._prompt_sent and meta.get("input_token_logprobs"):
            self._prompt_sent = True
            yield LogprobDelta(tuple(_entries(meta, "input", 0)), prompt=True)
        new = _entries(meta, "output", self._outputs)
        if new:
            self._outputs += len(new)
            yield LogprobDelta(tuple(new))
