"""How much text a chunk holds, per language, in characters (pure).

Chunks used to be sized in the LLM's tokens (256), which gave an English chunk about 750
characters and a Korean one about 140: the small model's tokenizer spends 2.7 tokens on a
Hangul syllable and 0.28 on an English letter. A budget in characters is the same whatever
the engine's tokenizer. The same content is shorter in Korean: the Debian FAQ's 14 pages
translated into Korean hold 0.58 of the English pages' characters (measured by
``appliance bench chunks``, whose table prints the ratio), so a Korean chunk gets 0.58 of the
English budget and holds about as much text. The English budget keeps today's English chunks
(mean about 650 characters on the PostgreSQL and Python manuals) and stays under the
embedder's 256 word pieces.

A section's language is decided by its letters (``rag.language.script_language``: Hangul at
least a quarter of them); Japanese and Chinese, denser still, take the Korean budget.
"""

from __future__ import annotations

from dataclasses import dataclass

from rag.language import script_language

KOREAN_RATIO = 0.58  # Korean characters per English character of the same text (Debian FAQ)


@dataclass(frozen=True)
class LanguageBudget:
    max_chars: int  # a chunk's size
    overlap_chars: int  # text repeated from the end of the previous chunk
    floor_chars: int  # a smaller chunk is merged into a neighbour

    def __post_init__(self) -> None:
        if (
            not 0 <= self.overlap_chars < self.max_chars
            or not 0 <= self.floor_chars < self.max_chars
        ):
            raise ValueError("overlap and floor must be smaller than the chunk size")


def scaled(english: LanguageBudget, ratio: float = KOREAN_RATIO) -> LanguageBudget:
    """The budget that holds as much text as ``english`` in a language ``ratio`` as long."""
    return LanguageBudget(
        max(1, round(english.max_chars * ratio)),
        round(english.overlap_chars * ratio),
        round(english.floor_chars * ratio),
    )


ENGLISH = LanguageBudget(max_chars=900, overlap_chars=110, floor_chars=120)


@dataclass(frozen=True)
class ChunkBudget:
    """Budgets for Latin-script text and for Hangul (and other CJK) text."""

    latin: LanguageBudget = ENGLISH
    hangul: LanguageBudget = scaled(ENGLISH)

    @classmethod
    def from_chars(cls, chars: int, overlap_chars: int, floor_chars: int) -> ChunkBudget:
        """English sizes given, the Korean ones scaled by ``KOREAN_RATIO``."""
        english = LanguageBudget(chars, overlap_chars, floor_chars)
        return cls(english, scaled(english))

    def for_text(self, text: str) -> LanguageBudget:
        return self.hangul if script_language(text) in ("ko", "ja", "zh") else self.latin
