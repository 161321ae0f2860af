"""Logprobs in OpenAI's shapes, as SGLang's ``/v1`` writes them.

- Completions: ``{"tokens", "token_logprobs", "top_logprobs", "text_offset"}``, one entry per
  token; ``top_logprobs`` holds a ``{token: logprob}`` map per token (``[]`` when
  ``logprobs`` is 0; null for an echoed prompt's first token, which has no logprob);
  ``text_offset`` is -1 (SGLang does not compute it). A token holding
  part of a UTF-8 character is written as its bytes read as Latin-1, so no byte is lost.
- Chat: ``{"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
  "bytes"}]}]}``.
Streamed, each chunk carries the entries of the tokens new since the previous chunk.
"""

from __future__ import annotations

from engine.base import TokenLogprob
from engine.server.logprob_format import TokenTexts


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def completion_logprobs(entries: list[TokenLogprob], raw: TokenTexts, top: bool) -> dict:
    """``raw`` gives each token id's bytes; ``top``: the request asked for ``logprobs`` > 0."""
    raw.learn(entries)
    return {
        "text_offset": [-1] * len(entries),
        "token_logprobs": [t.logprob for t in entries],
        "tokens": [_text(raw(t.token_id)) for t in entries],
        "top_logprobs": [_top(t, raw) for t in entries] if top else [],
    }


def _top(entry: TokenLogprob, raw: TokenTexts) -> dict[str, float] | None:
    if entry.logprob is None:  # the prompt's first token (echo): nothing to rank
        return None
    return {_text(raw(i)): lp for i, lp in entry.top}


def chat_logprobs(entries: list[TokenLogprob], raw: TokenTexts) -> dict:
    """``raw`` gives each token id's bytes."""
    raw.learn(entries)

    def one(token_id: int, logprob: float | None) -> dict:
        data = raw(token_id)
        text = data.decode("utf-8", errors="replace")
        return {"token": text, "logprob": logprob, "bytes": list(data)}

    content = [
        {**one(t.token_id, t.logprob), "top_logprobs": [one(i, lp) for i, lp in t.top]}
        for t in entries
    ]
    return {"content": content}
