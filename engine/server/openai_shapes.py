"""How the OpenAI endpoints' objects look: chat (``message``/``delta``) or text completions
(``text``), with their logprobs shape (``openai_logprobs.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.base import LogprobOptions, TokenLogprob
from engine.server.logprob_format import TokenTexts
from engine.server.openai_logprobs import chat_logprobs, completion_logprobs


@dataclass(frozen=True)
class Shape:
    obj: str
    chunk_obj: str
    chat: bool

    def choice(self, index: int, text: str, finish: str | None, logprobs: dict | None) -> dict:
        message = {"role": "assistant", "content": text}
        body = {"message": message} if self.chat else {"text": text}
        return {"index": index, **body, "logprobs": logprobs, "finish_reason": finish}

    def chunk_choice(
        self,
        index: int,
        text: str | None,
        finish: str | None,
        logprobs: dict | None = None,
        first: bool = False,
    ) -> dict:
        if not self.chat:
            return {
                "index": index,
                "text": text or "",
                "logprobs": logprobs,
                "finish_reason": finish,
            }
        delta: dict[str, str] = {"role": "assistant", "content": ""} if first else {}
        if text:
            delta["content"] = text
        return {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}

    def logprobs(
        self, raw: TokenTexts, options: LogprobOptions
    ) -> Callable[[list[TokenLogprob]], dict]:
        """Entries to this endpoint's logprobs object (``raw``: each token id's bytes)."""
        if self.chat:
            return lambda entries: chat_logprobs(entries, raw)
        return lambda entries: completion_logprobs(entries, raw, top=options.top_n > 0)


CHAT = Shape("chat.completion", "chat.completion.chunk", chat=True)
TEXT = Shape("text_completion", "text_completion", chat=False)
