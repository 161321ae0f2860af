"""Check a generated answer against its sources, sentence by sentence (pure).

Each sentence of the answer (``rag.sentences``; ``[n]`` markers after a sentence's period
belong to that sentence) is judged:

1. Facts (``rag.facts``: numbers, amounts, extensions, e-mail addresses, URLs, dates, times,
   phone numbers, codes) must each occur in an allowed source, or the sentence is unsupported
   ("fact not in sources: 12345"), whatever its wording.
2. What it says as a whole must be found in one place of the allowed sources: one of their
   sentences (or two adjacent ones) holds enough of its content words (Kiwi morphemes for
   Korean), is close enough in meaning (the embedder's cosine, when one is given) and negates
   alike (``rag.support``, thresholds ``SupportThresholds``). Words scattered over a whole
   chunk support nothing.
3. A sentence without a claim is kept with ``claim=False``, ``supported=True``; it counts
   neither as supported nor as unsupported (``AnswerCheck.total`` leaves it out): one with no
   fact and no content term once courtesy words such as "hope", "help", "questions", "도움" are
   removed ("I hope this helps.", reason "no claim"), and one that restates the question
   without answering it (no fact, no negation, its words the question's and asking words such
   as "steps", "how", "방법": "To reset your VPN password, follow these steps:", reason
   "restates the question").

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

import numpy as np

from rag.facts import Fact, SourceFacts, find_facts
from rag.sentences import Piece, split_pieces
from rag.support import SupportThresholds, TextEmbedder, is_korean, judge, matches
from rag.support_terms import ASKING_TERMS, COURTESY_TERMS, negations, terms

Rule = Literal["cited", "retrieved"]
RULES: tuple[Rule, ...] = ("cited", "retrieved")

_MARKER = re.compile(r"\[(\d{1,4}(?:\s*[,;]\s*\d{1,4})*)\]")
_LEADING_MARKERS = re.compile(r"(?:\s*\[\d{1,4}(?:\s*[,;]\s*\d{1,4})*\])+")
# an inline list number ("Steps: 1. Open. 2. Click"): not a fact
_ENUMERATOR = re.compile(r"(?:^|(?<=[:;\n])|(?<=[:;.!?]\s))\s*\d{1,2}[.)](?=\s)")


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
    question: str = "",
    embedder: TextEmbedder | None = None,
    thresholds: SupportThresholds | None = None,
) -> AnswerCheck:
    """Judge each sentence of ``answer`` against the sources (see the module doc).

    ``cited`` maps a citation number to its source text (every number the answer may cite);
    ``retrieved`` is every source text of the turn; ``known_numbers`` the citation numbers
    shown in the conversation. A number in ``known_numbers`` without text in ``cited`` is a
    valid marker that contributes no text. ``question`` (when given) lets a sentence that only
    restates it go uncounted; ``embedder`` (the appliance's loaded one) adds the meaning to
    the words; ``thresholds`` default to the calibrated ones.
    """
    _check_inputs(answer, cited, retrieved, rule)
    known = set(known_numbers)
    pieces = answer_pieces(answer)
    cites = [_markers(answer[p.start : p.end]) for p in pieces]
    bad = tuple(dict.fromkeys(n for cs in cites for n in cs if n not in known))
    answer_cites = tuple(dict.fromkeys(n for cs in cites for n in cs if n in known))
    everything = list(dict.fromkeys([*retrieved, *cited.values()]))
    sources = _sources(everything)
    cleans = [_strip_markers(answer[p.start : p.end]) for p in pieces]
    context = _Context(
        terms([question])[0] if question.strip() else None,
        thresholds or SupportThresholds(),
        embedder,
        _sentence_vectors(embedder, cleans),
    )
    verdicts = []
    for i, (piece, piece_cites, clean) in enumerate(zip(pieces, cites, cleans, strict=True)):
        own = tuple(n for n in piece_cites if n in known)
        if rule == "retrieved" or not (own or answer_cites):
            allowed = everything
        else:
            allowed = [cited[n] for n in (own or answer_cites) if n in cited]
        verdict = _judge(clean, [(t, sources[t]) for t in allowed], context, i)
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
class _Context:
    question: frozenset[str] | None  # the question's terms, when it was given
    thresholds: SupportThresholds
    embedder: TextEmbedder | None
    vectors: np.ndarray | None  # one row per answer sentence, when embedded


def _judge(
    clean: str, allowed: Sequence[tuple[str, SourceFacts]], context: _Context, index: int
) -> tuple[bool, tuple[str, ...], str, bool]:
    """(supported, unsupported facts, reason, claim) for one marker-free sentence."""
    facts = _facts(clean)
    sentence_terms = terms([clean])[0]
    claim_terms = sentence_terms - COURTESY_TERMS
    if not facts and not claim_terms:
        return True, (), "no claim", False
    if not facts and _restates(clean, claim_terms, context.question):
        return True, (), "restates the question", False
    missing = tuple(dict.fromkeys(f.text for f in facts if not any(s.holds(f) for _, s in allowed)))
    if missing:
        return False, missing, "fact not in sources: " + ", ".join(missing), True
    if not allowed:
        return False, (), "no source supports it", True
    vector = context.vectors[index] if context.vectors is not None else None
    found = matches(clean, sentence_terms, [t for t, _ in allowed], context.embedder, vector)
    verdict = judge(found, is_korean(clean), bool(facts), context.thresholds)
    if verdict.supported:
        return True, (), "ok", True
    best = verdict.best
    if best is None:
        return False, (), "no source supports it", True
    how = f"overlap {best.overlap:.2f}"
    if best.similarity is not None:
        how += f", similarity {best.similarity:.2f}"
    if not best.negation_ok:
        how += ", negated differently"
    return False, (), f"no source supports it ({how})", True


def _restates(clean: str, claim_terms: frozenset[str], question: frozenset[str] | None) -> bool:
    """Whether a fact-free sentence only restates the question (or announces the answer):
    asking words and the question's own words, nothing negated; a line that introduces what
    follows (ends in a colon) may hold one word more ("The rules:")."""
    if question is None or negations(clean):
        return False
    rest = claim_terms - ASKING_TERMS - question
    introduces = clean.rstrip().endswith(":")  # "The rules:", "Here is what to do:"
    asks = bool(claim_terms & ASKING_TERMS) or introduces or clean.rstrip().endswith("?")
    return asks and len(rest) <= (1 if introduces else 0)


def _sentence_vectors(embedder: TextEmbedder | None, cleans: Sequence[str]) -> np.ndarray | None:
    if embedder is None or not cleans:
        return None
    return embedder.embed([" ".join(c.split()) for c in cleans])


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
    answer: str, cited: Mapping[int, str], retrieved: Sequence[str], rule: str
) -> None:
    if not isinstance(answer, str):
        raise TypeError(f"answer must be str, got {type(answer).__name__}")
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    for n, text in cited.items():
        if not isinstance(n, int) or not isinstance(text, str):
            raise TypeError("cited must map int citation numbers to source texts")
    if isinstance(retrieved, str) or not all(isinstance(t, str) for t in retrieved):
        raise TypeError("retrieved must be a sequence of source texts")


# -- the source cache ------------------------------------------------------------------------

_cache: dict[str, SourceFacts] = {}
_CACHE_SIZE = 1024  # source texts kept analysed (chunks recur across turns)
_lock = threading.Lock()


def _sources(texts: Sequence[str]) -> dict[str, SourceFacts]:
    """The facts of each source text, from the cache where it was seen before."""
    with _lock:
        known = {t: _cache[t] for t in texts if t in _cache}
    todo = [t for t in texts if t not in known]
    if todo:
        for text in todo:
            known[text] = SourceFacts.of(text)
        with _lock:
            for text in todo:
                if len(_cache) >= _CACHE_SIZE:
                    _cache.pop(next(iter(_cache)))
                _cache[text] = known[text]
    return known
