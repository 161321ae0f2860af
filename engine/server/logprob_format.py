"""Logprobs as SGLang's ``/generate`` writes them in ``meta_info`` (sglang 0.5.23,
``TokenizerManager.add_logprob_to_meta_info``).

- ``input_token_logprobs`` / ``output_token_logprobs``: one ``[logprob, token_id, text]``
  triple per token; ``text`` is null unless ``return_text_in_logprobs``; the prompt's first
  token's logprob is null. ``output_token_logprobs_length`` counts the output triples.
- With ``top_logprobs_num`` > 0, ``input_top_logprobs`` / ``output_top_logprobs``: per
  position a list of triples, best first, or null (the prompt's first token).
- With ``token_ids_logprob``, ``input_token_ids_logprobs`` / ``output_token_ids_logprobs``:
  per position the asked ids' triples in the order asked, or null.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.base import LogprobDelta, LogprobOptions, TokenLogprob

Decode = Callable[[list[int]], list[Any]]


@dataclass
class LogprobLog:
    """The logprob items of one answer, gathered as they stream."""

    prompt: list[TokenLogprob] = field(default_factory=list)
    output: list[TokenLogprob] = field(default_factory=list)

    def add(self, item: LogprobDelta) -> None:
        (self.prompt if item.prompt else self.output).extend(item.tokens)


class TokenTexts:
    """Each token id's text (or bytes: whatever ``decode`` gives for a list of ids), decoded
    once per answer; ``None`` for every id when ``decode`` is None (texts not asked for)."""

    def __init__(self, decode: Decode | None) -> None:
        self._decode = decode
        self._known: dict[int, Any] = {}

    def __call__(self, token_id: int) -> Any:
        if self._decode is None:
            return None
        return self._known[token_id]

    def learn(self, entries: list[TokenLogprob]) -> None:
        """Decode, in one call, every id of ``entries`` not seen yet."""
        if self._decode is None:
            return
        ids = {t.token_id for t in entries}
        for t in entries:
            ids.update(i for i, _ in t.top)
            ids.update(i for i, _ in t.asked)
        new = sorted(ids - self._known.keys())
        if new:
            self._known.update(zip(new, self._decode(new), strict=True))


def native_logprobs(
    log: LogprobLog, options: LogprobOptions, texts: TokenTexts, *, output: bool = True
) -> dict:
    """The ``meta_info`` logprob keys for what ``log`` holds (``output`` False: no output
    tokens, as for ``max_new_tokens`` 0)."""
    outs = log.output if output else []
    texts.learn(log.prompt + outs)
    meta: dict = {
        "input_token_logprobs": [_triple(t.logprob, t.token_id, texts) for t in log.prompt],
        "output_token_logprobs": [_triple(t.logprob, t.token_id, texts) for t in outs],
        "output_token_logprobs_length": len(outs),
    }
    if options.top_n:
        meta["input_top_logprobs"] = [_alternatives(t, t.top, texts) for t in log.prompt]
        meta["output_top_logprobs"] = [_alternatives(t, t.top, texts) for t in outs]
    if options.token_ids:
        meta["input_token_ids_logprobs"] = [_alternatives(t, t.asked, texts) for t in log.prompt]
        meta["output_token_ids_logprobs"] = [_alternatives(t, t.asked, texts) for t in outs]
    return meta


def _triple(logprob: float | None, token_id: int, texts: TokenTexts) -> list:
    return [logprob, token_id, texts(token_id)]


def _alternatives(
    entry: TokenLogprob, pairs: tuple[tuple[int, float], ...], texts: TokenTexts
) -> list | None:
    if entry.logprob is None or not pairs:
        return None
    return [_triple(lp, i, texts) for i, lp in pairs]
