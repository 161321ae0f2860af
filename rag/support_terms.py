"""The words a sentence claims with, for ``rag.support`` and ``rag.verify`` (pure).

- ``terms``: a text's content terms: ``rag.bm25_tokenizer``'s (Kiwi morphemes for Hangul: nouns,
  verb and adjective stems, foreign words, numbers; a regex for the rest), English ones lightly
  stemmed ("approves", "approved", "approve" share "approv"), without stopwords and one-letter
  Latin tokens. Hangul text is analysed with ``rag.sentences``' Kiwi (one instance a process).
- ``negations``: how the text negates: English "not", "no", "never", "n't", "without" ...;
  Korean 않/안/못 (negative auxiliaries and adverbs), 없 ("there is no"), 아니 (negative copula),
  the prohibitive 말 ("하지 마세요"). A sentence that negates what its source affirms (or the
  other way round) is not supported by it, however many words they share.
- ``COURTESY_TERMS``: words that carry no claim ("I hope this helps", "도움이 되길 바랍니다").
- ``ASKING_TERMS``: words an answer uses to restate a question without answering it
  ("To reset your VPN password, follow these steps:").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rag.bm25_tokenizer import HANGUL, kiwi_tokens, latin_tokens
from rag.sentences import shared_kiwi

_COURTESY_TEXT = """hope helps help helpful glad happy assist assistance question questions let
me know feel free ask sure thank thanks please welcome anything else further more additional
any other hi hello great course certainly yes okay ok also just here note following answer
based provided context information documents document sources source according mentioned
see details detail refer done
도움 되 바라 점 있 묻 물어보 추가 질문 말씀 감사 주 드리 하 알 궁금 언제 안내 참고 바랍"""
COURTESY_TERMS = frozenset(_COURTESY_TEXT.split())
_ASKING_TEXT = """follow step steps way ways below how can need want like do process procedure
instruction instructions find out learn know what which when where why who explain tell
show describe
방법 다음 단계 아래 절차 어떻게 무엇 어디 얼마 며칠 몇 경우 수 것 같 위하 필요 알리 설명"""
ASKING_TERMS = frozenset(_ASKING_TEXT.split())
_EXTRA_STOPWORDS_TEXT = """all also any been being both can could did each get got had may might
more most must need needs only other same should some such very would yes"""
_EXTRA_STOPWORDS = frozenset(_EXTRA_STOPWORDS_TEXT.split())

_ENGLISH_NEGATION = re.compile(
    r"\b(?:not|no|never|none|nor|neither|nothing|nobody|nowhere|without|cannot)\b|n[’']t\b",
    re.IGNORECASE,
)
# (form, tag prefix) of Kiwi morphemes that negate
_KOREAN_NEGATION = frozenset(
    {
        ("않", "VX"),
        ("안", "MAG"),
        ("못", "MAG"),
        ("못하", "VX"),
        ("없", "VA"),
        ("아니", "VCN"),
        ("아니하", "VX"),
        ("말", "VX"),
    }
)


def terms(texts: Sequence[str]) -> list[frozenset[str]]:
    """Each text's content terms (see the module doc)."""
    out = []
    for text in texts:
        if HANGUL.search(text):
            tokens = kiwi_tokens(shared_kiwi().tokenize(text))
        else:
            tokens = latin_tokens(text)
        out.append(
            frozenset(
                stem(t)
                for t in tokens
                if t not in _EXTRA_STOPWORDS and not (len(t) == 1 and t.isascii() and t.isalpha())
            )
        )
    return out


def stem(token: str) -> str:
    """A light English suffix strip: "approves", "approved", "approve" share "approv"."""
    if not token.isascii() or not token.isalpha() or len(token) <= 4:
        return token
    for suffix in ("ing", "ed", "es", "s", "e"):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            return token[: -len(suffix)]
    return token


# bounds and restrictions a sentence must share with its source: "at least 14" is not "at most
# 14", "only on weekends" is not "on weekends" (English stopwords, so not terms; Korean ones are
# Kiwi nouns or particles, checked as morphemes)
_ENGLISH_QUALIFIERS = re.compile(
    r"\b(at least|at most|more than|less than|fewer than|no more than|no later than|up to|only|"
    r"maximum|minimum|before|after|within|until|always|every)\b",
    re.IGNORECASE,
)
_KOREAN_QUALIFIERS = frozenset(
    {
        ("이상", "NNG"),
        ("이하", "NNG"),
        ("미만", "NNG"),
        ("초과", "NNG"),
        ("최대", "NNG"),
        ("최소", "NNG"),
        ("이내", "NNG"),
        ("전", "NNG"),
        ("후", "NNG"),
        ("까지", "JX"),
        ("만", "JX"),
        ("부터", "JX"),
    }
)


def qualifiers(text: str) -> frozenset[str]:
    """The bounds and restrictions of ``text`` (lowercased English phrases, Korean forms)."""
    found = {" ".join(m.lower().split()) for m in _ENGLISH_QUALIFIERS.findall(text)}
    if HANGUL.search(text):
        for m in shared_kiwi().tokenize(text):
            if (m.form, m.tag.split("-")[0]) in _KOREAN_QUALIFIERS:
                found.add(m.form)
    return frozenset(found)


def negations(text: str) -> int:
    """How many negations ``text`` holds (English words, Korean morphemes)."""
    count = len(_ENGLISH_NEGATION.findall(text))
    if HANGUL.search(text):
        for m in shared_kiwi().tokenize(text):
            if (m.form, m.tag.split("-")[0]) in _KOREAN_NEGATION:
                count += 1
    return count
