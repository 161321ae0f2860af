"""Does a source say what an answer sentence says? Sentence-level support (pure).

An answer sentence is compared with every *window* of the sources it may rely on: each piece
(sentence, list item, table row; ``rag.sentences``) of a source, and each two adjacent pieces
together (an answer often joins a rule and the sentence after it). For each window:

- ``overlap``: the share of the sentence's content terms (``rag.support_terms``: stemmed English
  words, Kiwi morphemes for Korean; courtesy words aside) that the window holds;
- ``similarity``: the cosine between the sentence's and the window's embeddings (the appliance's
  loaded sentence-transformers model), when an embedder is given;
- ``negation_ok``: the polarity agrees: each clause the sentence negates matches a clause the
  window negates, the sentence does not state a clause the window negates without its negation
  (half of that clause's terms, no negation), its bounds ("at least", "only", "이상", "까지")
  are the window's, and it does not use a negative-prefixed word ("unpaid") where the window
  has the plain one ("paid").

The sentence is supported when one window passes all three at once: overlap at least
``min_overlap`` (``min_overlap_facts`` when the sentence states facts, each of which the
sources hold: ``rag.verify`` checks those), similarity at least ``min_similarity``; Hangul
sentences have their own pair of thresholds (all-MiniLM-L6-v2 is English-only, so for Korean
the words carry the judgement). Without an embedder, ``lexical_min_overlap`` is the rule.
Pooling the words of every source, as the check did before, let a sentence pass on words
scattered over a whole chunk ("if someone tries to steal your device after that time frame").

The thresholds are calibrated on labelled answer sentences (``appliance bench support``,
labels in ``appliance/bench/support_labels``: 499 sentences, the CPU model's answers to the
sample questions in English and Korean, and sentences copied, paraphrased or distorted from the
sources): best dev recall at dev precision >= 0.95. On the held-out questions' sentences,
precision / recall of "supported": 0.97 / 0.95 English, 1.00 / 0.87 Korean with the embedder;
0.93 / 0.97 and 0.91 / 0.91 on the words alone; the pooled rule before was 0.59 / 1.00 and
0.56 / 1.00. The config section ``chat`` carries them (``support_*``).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from rag.bm25_tokenizer import HANGUL
from rag.sentences import split_pieces, split_sentences
from rag.support_terms import COURTESY_TERMS, negations, qualifiers, terms

# a sentence without a negation that holds this share of the terms of a clause the source
# negates states that clause the other way round
NEGATED_CLAUSE_SHARE = 0.5
NEGATIVE_PREFIXES = ("un", "non", "dis", "in", "im", "ir", "il")
_CLAUSE = re.compile(r"[^.;:,!?\n]+")


class TextEmbedder(Protocol):
    """What the rule needs of ``rag.embeddings.Embedder``: a name and normalised vectors."""

    name: str

    def embed(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray: ...


@dataclass(frozen=True)
class SupportThresholds:
    """The rule's thresholds (see the module doc); defaults are the calibrated ones."""

    min_overlap: float = 0.8
    min_overlap_facts: float = 0.6
    min_similarity: float = 0.65
    korean_min_overlap: float = 0.85
    korean_min_overlap_facts: float = 0.8
    korean_min_similarity: float = 0.5
    lexical_min_overlap: float = 1.0

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {value}")


@dataclass(frozen=True)
class Window:
    """One or two adjacent pieces of a source, as the rule reads them."""

    text: str
    terms: frozenset[str]
    negations: int
    negated_clauses: tuple[frozenset[str], ...]  # the terms of each clause that negates
    qualifiers: frozenset[str]  # "at least", "only", "이상", ... (``rag.support_terms``)


@dataclass(frozen=True)
class Match:
    """How well one window supports one sentence."""

    overlap: float
    similarity: float | None  # None without an embedder
    negation_ok: bool
    window: str


@dataclass(frozen=True)
class Support:
    """The verdict on one sentence's content: the best window and whether it passes."""

    supported: bool
    best: Match | None  # the passing window, else the one with the most overlap


def matches(
    sentence: str,
    sentence_terms: frozenset[str],
    sources: Sequence[str],
    embedder: TextEmbedder | None = None,
    vector: np.ndarray | None = None,
) -> list[Match]:
    """Every window of ``sources`` against one marker-free ``sentence`` (``vector``: its
    embedding, when the caller embedded its sentences in one batch)."""
    windows = [w for text in dict.fromkeys(sources) for w in source_windows(text)]
    if not windows:
        return []
    wanted = (sentence_terms - COURTESY_TERMS) or sentence_terms
    sims: Sequence[float | None] = [None] * len(windows)
    if embedder is not None:
        if vector is None:
            vector = embedder.embed([sentence])[0]
        vecs = window_vectors(embedder, [w.text for w in windows])
        sims = [float(s) for s in vecs @ vector]
    polarity = _Polarity(
        frozenset(_negated_clauses(sentence)) if negations(sentence) else None,
        qualifiers(sentence),
        sentence_terms,
    )
    return [
        Match(
            len(wanted & w.terms) / len(wanted) if wanted else 1.0,
            sim,
            polarity.agrees(w),
            w.text,
        )
        for w, sim in zip(windows, sims, strict=True)
    ]


@dataclass(frozen=True)
class _Polarity:
    """What must agree between a sentence and a window besides the words: negation, bounds
    and negative prefixes."""

    negated: frozenset[frozenset[str]] | None  # the sentence's negated clauses, if it negates
    qualifiers: frozenset[str]
    terms: frozenset[str]

    def agrees(self, window: Window) -> bool:
        if not self.qualifiers <= window.qualifiers:
            return False  # "at most 14" where the source says "at least 14"
        if any(_prefixed(t, window.terms) for t in self.terms - window.terms):
            return False  # "unpaid" where the source says "paid"
        if self.negated is not None:
            # each negated clause of the sentence matches a negated clause of the window
            return all(
                any(_shares(clause, theirs) for theirs in window.negated_clauses)
                for clause in self.negated
                if clause
            ) and bool(window.negated_clauses)
        # a clause the window negates, stated without its negation
        return not any(_shares(clause, self.terms) for clause in window.negated_clauses)


def _shares(clause: frozenset[str], other: frozenset[str]) -> bool:
    return bool(clause) and len(clause & other) / len(clause) >= NEGATED_CLAUSE_SHARE


def _prefixed(term: str, window_terms: frozenset[str]) -> bool:
    """Whether ``term`` is a negative-prefixed form ("unpaid") of a window term ("paid")."""
    if not term.isascii():
        return False
    for prefix in NEGATIVE_PREFIXES:
        rest = term[len(prefix) :]
        if term.startswith(prefix) and len(rest) >= 4 and rest in window_terms:
            return True
    return False


def judge(
    found: Sequence[Match], korean: bool, has_facts: bool, thresholds: SupportThresholds
) -> Support:
    """Whether one window of ``found`` supports the sentence (see the module doc)."""
    t = thresholds
    embedded = bool(found) and found[0].similarity is not None
    if not embedded:
        need_overlap, need_sim = t.lexical_min_overlap, 0.0
    elif korean:
        need_overlap = t.korean_min_overlap_facts if has_facts else t.korean_min_overlap
        need_sim = t.korean_min_similarity
    else:
        need_overlap = t.min_overlap_facts if has_facts else t.min_overlap
        need_sim = t.min_similarity
    if has_facts and not embedded:
        need_overlap = min(
            need_overlap, t.korean_min_overlap_facts if korean else t.min_overlap_facts
        )
    passing = [
        m
        for m in found
        if m.negation_ok and m.overlap >= need_overlap and (m.similarity or 0.0) >= need_sim
    ]
    if passing:
        return Support(True, max(passing, key=lambda m: (m.overlap, m.similarity or 0.0)))
    best = max(found, key=lambda m: (m.overlap, m.similarity or 0.0), default=None)
    return Support(False, best)


def is_korean(text: str) -> bool:
    """Whether the rule reads ``text`` with the Korean thresholds (it holds Hangul)."""
    return bool(HANGUL.search(text))


# -- windows and vectors, cached (chunks recur across turns) ----------------------------------

_CACHE_SIZE = 1024
_windows: OrderedDict[str, tuple[Window, ...]] = OrderedDict()
_vecs: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
_lock = threading.Lock()


def source_windows(text: str) -> tuple[Window, ...]:
    """Each piece of ``text``, each sentence of a list item, and each two adjacent pieces,
    analysed (cached by text)."""
    with _lock:
        if text in _windows:
            _windows.move_to_end(text)
            return _windows[text]
    pieces = [text[p.start : p.end] for p in split_pieces(text)]
    inner = [
        text[q.start : q.end]
        for p in split_pieces(text)
        if p.kind == "item"
        for q in split_sentences(text, p.start, p.end)
    ]
    pairs = [f"{a} {b}" for a, b in zip(pieces, pieces[1:], strict=False)]
    spans = list(dict.fromkeys([*pieces, *(x for x in inner if x not in pieces), *pairs]))
    counts = [negations(s) for s in spans]
    found = tuple(
        Window(s, t, n, _negated_clauses(s) if n else (), qualifiers(s))
        for s, t, n in zip(spans, terms(spans), counts, strict=True)
    )
    with _lock:
        _windows[text] = found
        while len(_windows) > _CACHE_SIZE:
            _windows.popitem(last=False)
    return found


def _negated_clauses(text: str) -> tuple[frozenset[str], ...]:
    clauses = [m.group() for m in _CLAUSE.finditer(text)]
    negating = [c for c in clauses if negations(c)]
    return tuple(terms(negating)) if negating else ()


def window_vectors(embedder: TextEmbedder, texts: Sequence[str]) -> np.ndarray:
    """Normalised vectors of window ``texts``, cached by model name and text."""
    name = getattr(embedder, "name", type(embedder).__name__)
    with _lock:
        known = {t: _vecs[(name, t)] for t in texts if (name, t) in _vecs}
    todo = [t for t in dict.fromkeys(texts) if t not in known]
    fresh = dict(zip(todo, embedder.embed(todo), strict=True)) if todo else {}
    with _lock:
        for t, vec in fresh.items():
            _vecs[(name, t)] = vec
        while len(_vecs) > 4 * _CACHE_SIZE:
            _vecs.popitem(last=False)
    return np.asarray([known[t] if t in known else fresh[t] for t in texts], dtype=np.float32)
