"""Check a generated answer against its sources, sentence by sentence (pure).

Each sentence of the answer (``rag.sentences``; ``[n]`` markers after a sentence's period
belong to that sentence) is judged:

1. Facts (``rag.facts``: numbers, amounts, extensions, e-mail addresses, URLs, dates, times,
   phone numbers, codes) must each occur in an allowed source, or the sentence is unsupported
   ("fact not in sources: 12345"), whatever its wording.
2. Its content words must overlap the allowed sources: the share of the sentence's BM25 terms
   (``rag.bm25_tokenizer``, Kiwi morphemes for Korean, lightly stemmed for English) found in
   them is at least ``SUPPORT_THRESHOLD`` (0.5), or ``FACT_SUPPORT_THRESHOLD`` (0.25) when all
   the sentence's facts were found (the fact anchors it; the words only need to be related).
3. A sentence without a claim (no fact and no content term once courtesy words such as
   "hope", "help", "questions", "도움" are removed: "I hope this helps.") is kept with
   ``claim=False``, ``supported=True`` and reason "no claim"; it counts neither as verified
   nor as unsupported (``AnswerCheck.total`` leaves it out).

Rules for the allowed sources:

- ``"cited"`` (the default): a sentence with valid ``[n]`` markers is checked against the
  sources it cites; a sentence without one against every source the answer cites (a marker at
  the end of a paragraph covers the paragraph); an answer that cites nothing against every
  retrieved source (there is no citation to verify, but the facts must still come from the
  documents). This is the default because it verifies the citations themselves: a fact taken
  from the wrong chunk, or an ``[n]`` that points at a source that does not say it, is caught,
  and a user who clicks ``[n]`` finds the fact there. It never lets through a fact that
  ``"retrieved"`` would flag.
- ``"retrieved"``: every sentence is checked against every retrieved (and cited) source.

A marker whose number is not in ``known_numbers`` (the numbers shown in the conversation) is a
bad marker: it is listed in ``AnswerCheck.bad_markers`` and counts as no citation.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from rag.bm25_tokenizer import HANGUL, kiwi_tokens, latin_tokens
from rag.facts import Fact, SourceFacts, find_facts
from rag.sentences import Piece, shared_kiwi, split_pieces

Rule = Literal["cited", "retrieved"]
RULES: tuple[Rule, ...] = ("cited", "retrieved")
SUPPORT_THRESHOLD = 0.5
FACT_SUPPORT_THRESHOLD = 0.25

_MARKER = re.compile(r"\[(\d{1,4}(?:\s*[,;]\s*\d{1,4})*)\]")
_LEADING_MARKERS = re.compile(r"(?:\s*\[\d{1,4}(?:\s*[,;]\s*\d{1,4})*\])+")
# an inline list number ("Steps: 1. Open. 2. Click"): not a fact
_ENUMERATOR = re.compile(r"(?:^|(?<=[:;\n])|(?<=[:;.!?]\s))\s*\d{1,2}[.)](?=\s)")
_COURTESY_TEXT = """hope helps help helpful glad happy assist assistance question questions let
me know feel free ask sure thank thanks please welcome anything else further more additional
any other hi hello great course certainly yes okay ok also just here note following answer
based provided context information documents document sources source according mentioned
see details detail refer done
도움 되 바라 점 있 묻 물어보 추가 질문 말씀 감사 주 드리 하 알 궁금 언제 안내 참고 바랍"""
COURTESY_TERMS = frozenset(_COURTESY_TEXT.split())
_EXTRA_STOPWORDS_TEXT = """all also any been being both can could did each get got had may might
more most must need needs only other same should some such very would yes"""
_EXTRA_STOPWORDS = frozenset(_EXTRA_STOPWORDS_TEXT.split())


@dataclass(frozen=True)
class SentenceVerdict:
    """The verdict on one answer sentence, ``answer[start:end]``."""

    start: int
    end: int
    supported: bool
    cites: tuple[int, ...]  # the [n] markers in this sentence, in order, each once
    unsupported_facts: tuple[str, ...]  # facts (as written) found in no allowed source
    reason: str  # short, for the tooltip and the log
    claim: bool = True  # False for a sentence that states nothing ("I hope this helps.")


@dataclass(frozen=True)
class AnswerCheck:
    """The verdicts on every sentence of an answer, and the markers that point nowhere."""

    sentences: tuple[SentenceVerdict, ...]
    bad_markers: tuple[int, ...]  # [n] whose n is not shown in the conversation, each once

    @property
    def supported(self) -> int:
        """How many claims (sentences that state something) the sources support."""
        return sum(1 for s in self.sentences if s.claim and s.supported)

    @property
    def total(self) -> int:
        """How many claims the answer makes ("verified: supported of total")."""
        return sum(1 for s in self.sentences if s.claim)


def extract_facts(text: str) -> list[str]:
    """The checkable facts of ``text`` as written (``[n]`` markers and list numbers aside)."""
    return [f.text for f in _facts(_strip_markers(text))]


def verify_answer(
    answer: str,
    cited: Mapping[int, str],
    retrieved: Sequence[str],
    known_numbers: Collection[int],
    *,
    rule: Rule = "cited",
    threshold: float = SUPPORT_THRESHOLD,
) -> AnswerCheck:
    """Judge each sentence of ``answer`` against the sources (see the module doc).

    ``cited`` maps a citation number to its source text (every number the answer may cite);
    ``retrieved`` is every source text of the turn; ``known_numbers`` the citation numbers
    shown in the conversation. A number in ``known_numbers`` without text in ``cited`` is a
    valid marker that contributes no text.
    """
    _check_inputs(answer, cited, retrieved, rule, threshold)
    known = set(known_numbers)
    pieces = answer_pieces(answer)
    cites = [_markers(answer[p.start : p.end]) for p in pieces]
    bad = tuple(dict.fromkeys(n for cs in cites for n in cs if n not in known))
    answer_cites = tuple(dict.fromkeys(n for cs in cites for n in cs if n in known))
    everything = list(dict.fromkeys([*retrieved, *cited.values()]))
    sources = _sources(everything)
    cleans = [_strip_markers(answer[p.start : p.end]) for p in pieces]
    verdicts = []
    for piece, piece_cites, clean, terms in zip(pieces, cites, cleans, _terms(cleans), strict=True):
        own = tuple(n for n in piece_cites if n in known)
        if rule == "retrieved" or not (own or answer_cites):
            allowed = everything
        else:
            allowed = [cited[n] for n in (own or answer_cites) if n in cited]
        verdict = _judge(clean, terms, [sources[t] for t in allowed], threshold)
        reason = verdict[2]
        flagged = [n for n in piece_cites if n not in known]
        if flagged:
            reason += "; unknown citation " + ", ".join(f"[{n}]" for n in flagged)
        verdicts.append(
            SentenceVerdict(
                piece.start, piece.end, verdict[0], piece_cites, verdict[1], reason, verdict[3]
            )
        )
    return AnswerCheck(tuple(verdicts), bad)


def answer_pieces(answer: str) -> list[Piece]:
    """The answer's sentences; markers after a sentence's end move back onto that sentence."""
    out: list[Piece] = []
    for piece in split_pieces(answer):
        lead = _LEADING_MARKERS.match(answer, piece.start, piece.end)
        if lead and out and not answer[out[-1].end : piece.start].count("\n"):
            prev = out[-1]
            out[-1] = Piece(prev.start, lead.end(), prev.kind)
            start = lead.end()
            while start < piece.end and answer[start].isspace():
                start += 1
            if start >= piece.end:
                continue
            piece = Piece(start, piece.end, piece.kind)
        out.append(piece)
    return out


@dataclass(frozen=True)
class _Source:
    facts: SourceFacts
    terms: frozenset[str]


def _judge(
    clean: str, terms: frozenset[str], allowed: Sequence[_Source], threshold: float
) -> tuple[bool, tuple[str, ...], str, bool]:
    """(supported, unsupported facts, reason, claim) for one marker-free sentence."""
    facts = _facts(clean)
    claim_terms = terms - COURTESY_TERMS
    if not facts and not claim_terms:
        return True, (), "no claim", False
    missing = tuple(
        dict.fromkeys(f.text for f in facts if not any(s.facts.holds(f) for s in allowed))
    )
    if missing:
        return False, missing, "fact not in sources: " + ", ".join(missing), True
    if not allowed:
        return False, (), "no source supports it", True
    pool = frozenset().union(*(s.terms for s in allowed))
    wanted = claim_terms or terms
    overlap = len(wanted & pool) / len(wanted) if wanted else 1.0
    needed = FACT_SUPPORT_THRESHOLD if facts else threshold
    if overlap >= needed:
        return True, (), "ok", True
    return False, (), f"no source supports it (overlap {overlap:.2f})", True


def _facts(clean: str) -> list[Fact]:
    enumerators = [m.span() for m in _ENUMERATOR.finditer(clean)]
    return [
        f for f in find_facts(clean) if not any(s <= f.start and f.end <= e for s, e in enumerators)
    ]


def _markers(text: str) -> tuple[int, ...]:
    found = [int(n) for m in _MARKER.finditer(text) for n in re.split(r"\s*[,;]\s*", m.group(1))]
    return tuple(dict.fromkeys(found))


def _strip_markers(text: str) -> str:
    """The text with each ``[n]`` marker blanked (same length, so offsets hold)."""
    return _MARKER.sub(lambda m: " " * len(m.group()), text)


def _check_inputs(
    answer: str, cited: Mapping[int, str], retrieved: Sequence[str], rule: str, threshold: float
) -> None:
    if not isinstance(answer, str):
        raise TypeError(f"answer must be str, got {type(answer).__name__}")
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be within [0, 1], got {threshold}")
    for n, text in cited.items():
        if not isinstance(n, int) or not isinstance(text, str):
            raise TypeError("cited must map int citation numbers to source texts")
    if isinstance(retrieved, str) or not all(isinstance(t, str) for t in retrieved):
        raise TypeError("retrieved must be a sequence of source texts")


# -- terms and the source cache --------------------------------------------------------------

_cache: dict[str, _Source] = {}
_CACHE_SIZE = 1024  # source texts kept analysed (chunks recur across turns)
_lock = threading.Lock()


def _terms(texts: Sequence[str]) -> list[frozenset[str]]:
    """Each text's stemmed BM25 terms, without stopwords and one-letter Latin tokens.

    The terms are ``rag.bm25_tokenizer``'s (its Kiwi morphemes for Hangul, its regex for the
    rest), analysed with ``rag.sentences``' Kiwi so the process holds one instance for both.
    """
    out = []
    for text in texts:
        if HANGUL.search(text):
            tokens = kiwi_tokens(shared_kiwi().tokenize(text))
        else:
            tokens = latin_tokens(text)
        out.append(
            frozenset(
                _stem(t)
                for t in tokens
                if t not in _EXTRA_STOPWORDS and not (len(t) == 1 and t.isascii() and t.isalpha())
            )
        )
    return out


def _stem(token: str) -> str:
    """A light English suffix strip: "approves", "approved", "approve" share "approv"."""
    if not token.isascii() or not token.isalpha() or len(token) <= 4:
        return token
    for suffix in ("ing", "ed", "es", "s", "e"):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            return token[: -len(suffix)]
    return token


def _sources(texts: Sequence[str]) -> dict[str, _Source]:
    """The analysis of each source text, from the cache where it was seen before."""
    with _lock:
        known = {t: _cache[t] for t in texts if t in _cache}
    todo = [t for t in texts if t not in known]
    if todo:
        for text, terms in zip(todo, _terms(todo), strict=True):
            known[text] = _Source(SourceFacts.of(text), terms)
        with _lock:
            for text in todo:
                if len(_cache) >= _CACHE_SIZE:
                    _cache.pop(next(iter(_cache)))
                _cache[text] = known[text]
    return known
