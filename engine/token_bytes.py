"""Each token's own text and raw bytes, from a Hugging Face tokenizer, for logprob reports.

A token of a byte-level BPE (GPT-2's scheme, SmolLM2's and Llama 3's) can hold part of a
UTF-8 character; decoded alone it reads as U+FFFD, so its bytes come from the token's
symbols through the byte-level alphabet. Other tokenizers' tokens are whole text.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any


@cache
def _byte_of_symbol() -> dict[str, int]:
    """The byte-level alphabet: printable Latin-1 bytes stand for themselves, the other bytes
    for the code points from 256 on, in byte order."""
    kept = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    symbols = dict(zip(kept, kept, strict=True))
    shifted = 0
    for byte in range(256):
        if byte not in symbols:
            symbols[byte] = 256 + shifted
            shifted += 1
    return {chr(code): byte for byte, code in symbols.items()}


def is_byte_level(tokenizer: Any) -> bool:
    """Whether ``tokenizer``'s decoder is byte-level (tokens spell bytes, not text)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return False
    decoder = json.loads(backend.to_str()).get("decoder") or {}
    kinds = [decoder.get("type")] + [d.get("type") for d in decoder.get("decoders") or []]
    return "ByteLevel" in kinds


def token_texts(tokenizer: Any, ids: list[int]) -> list[str]:
    """Each token decoded alone, special tokens included (SGLang's text in logprobs)."""
    return tokenizer.batch_decode([[i] for i in ids])


def token_bytes(tokenizer: Any, ids: list[int], byte_level: bool) -> list[bytes]:
    """Each token's raw bytes (``byte_level``: from ``is_byte_level(tokenizer)``)."""
    if not byte_level:
        return [text.encode() for text in token_texts(tokenizer, ids)]
    alphabet = _byte_of_symbol()
    out = []
    for piece, text in zip(
        tokenizer.convert_ids_to_tokens(ids), token_texts(tokenizer, ids), strict=True
    ):
        if all(symbol in alphabet for symbol in piece):
            out.append(bytes(alphabet[symbol] for symbol in piece))
        else:  # an added token (e.g. a special token) is spelled as its text
            out.append(text.encode())
    return out


class TokenDecoder:
    """``token_texts`` and ``token_bytes`` for one tokenizer; whether it is byte-level is
    found on the first ``bytes`` call and remembered."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._byte_level: bool | None = None

    def texts(self, ids: list[int]) -> list[str]:
        return token_texts(self.tokenizer, ids)

    def bytes(self, ids: list[int]) -> list[bytes]:
        if self._byte_level is None:
            self._byte_level = is_byte_level(self.tokenizer)
        return token_bytes(self.tokenizer, ids, self._byte_level)
