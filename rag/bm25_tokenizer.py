"""Korean-aware lexical tokens for BM25: Kiwi morphemes for Hangul, a regex for the rest.

Hangul text goes through Kiwi's morphological analysis (the model ships in the
``kiwipiepy-model`` wheel: nothing is downloaded) and keeps content morphemes: nouns (NN*),
verb and adjective stems (VV, VA), foreign words (SL) and numbers (SN). Text without Hangul
is split into word characters. Everything is lowercased and a small English stopword list is
dropped, so "VPN 비밀번호를" and "vpn 비밀번호" share the tokens ``vpn``, ``비밀번호``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from rag.sentences import shared_kiwi

HANGUL = re.compile(r"[\uac00-\ud7a3\u1100-\u11ff\u3130-\u318f]")
WORD = re.compile(r"[^\W_]+")
KEEP_TAGS = frozenset({"NNG", "NNP", "NNB", "VV", "VA", "SL", "SN"})
_STOPWORDS_TEXT = """a an and are as at be but by can do does for from has have how i if in into
is it its no not of on or our so than that the their then there these they this to was we were
what when where which who will with you your"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())


class Tokenizer:
    """Turns text into BM25 tokens with the process's one Kiwi (``rag.sentences.shared_kiwi``).

    Kiwi holds about 400 MiB, so the tokenizer, the sentence splitter and ``rag.verify`` share
    one instance; it is built on the first Hangul text (about 2-5 s), never at import. Kiwi's
    options do not depend on who builds it, so the tokens are the same as with a private one.
    """

    def _analyser(self) -> Any:  # noqa: ANN401 - kiwipiepy has no type stubs
        return shared_kiwi()

    def tokenize(self, text: str) -> list[str]:
        """The tokens of one text."""
        return self.tokenize_many([text])[0]

    def tokenize_many(self, texts: Sequence[str]) -> list[list[str]]:
        """The tokens of each text; Hangul texts are analysed in one Kiwi batch."""
        out: list[list[str]] = [[] for _ in texts]
        korean = [i for i, t in enumerate(texts) if HANGUL.search(t)]
        for i, text in enumerate(texts):
            if not HANGUL.search(text):
                out[i] = latin_tokens(text)
        if korean:
            kiwi = self._analyser()
            batch = [texts[i] for i in korean]
            if kiwi.num_workers == 0:  # Kiwi's batch mode needs worker threads
                analysed = [kiwi.tokenize(t) for t in batch]
            else:
                analysed = kiwi.tokenize(batch)
            for i, morphs in zip(korean, _iterate(analysed), strict=True):
                out[i] = kiwi_tokens(morphs)
        return out


def _iterate(result: Any) -> Iterator[Any]:  # noqa: ANN401
    yield from result


def latin_tokens(text: str) -> list[str]:
    """Lowercased word-character runs, minus English stopwords."""
    return [w for w in WORD.findall(text.lower()) if w not in STOPWORDS]


def kiwi_tokens(morphs: Sequence[Any]) -> list[str]:
    """Content morphemes of one Kiwi analysis, lowercased, minus English stopwords."""
    out = []
    for m in morphs:
        tag = m.tag.split("-")[0]  # "VV-R" / "VA-I": regular and irregular stems
        if tag in KEEP_TAGS:
            form = m.form.lower()
            if form not in STOPWORDS:
                out.append(form)
    return out
