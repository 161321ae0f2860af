"""Evidence scores (pure): how well each piece of the retrieved chunks matches the question.

Every piece (sentence, list item, table row; stored at ingest, see ``rag.piece_store``) of the
candidate chunks gets two scores against the question:

- dense: the cosine between the question's embedding and the piece's vector;
- lexical: the share of the question's BM25 tokens (``rag.bm25_tokenizer``: Kiwi morphemes
  for Hangul) that the piece holds, each token weighted by its BM25 idf among the candidate
  pieces, so words every piece shares ("VPN" in the VPN document) count little. In [0, 1].

They are fused linearly, ``(1 - w) * dense + w * lexical``, with a weight by the question's
language, because the default embedder (all-MiniLM-L6-v2) is English-only. Measured on the
48 questions of ``appliance/sample_corpus/qa.json`` (27 English, 21 Korean), top 4 retrieved
chunks, "top-1 piece holds an accepted answer":

  w          0.0   0.2   0.3   0.4   0.5   0.6   0.7   0.8   1.0
  English     14    19    20    21    21    20    20    19    17   (of 27; ceiling 26)
  Korean       0     5     6     9    10    11    13    13    13   (of 21; ceiling 14)

Dense alone finds no Korean fact. With Korean retrieval ranked by BM25 (``rag.hybrid``: the
dense side has no weight for an all-Hangul query), the fact's chunk is in the top 4 for 19 of
21, and the Korean sweep moves: top-1 / top-2 hold the answer for 13 / 16 at 0.7, 15 / 17 at
0.8 and 0.9, 14 / 18 at 1.0. So ``w`` is 0.4 for English and 0.8 for a question with a Hangul
token. Rank fusion (RRF of the two piece rankings) was measured too: English at
best 17 of 27 against 19 for linear (both before the colon rule below), Korean 13 for both.
A piece ending in a colon hands its score to the list below it (``_inherit_intros``): English
top-1 went from 19 to 21 of 27 with it. English words lose their inflection (``stem``) on both
sides; that keeps 21 at 0.4 and widens the plateau (20 at 0.3, 21 at 0.5; top 10 chunks: 21).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rag.piece_store import ChunkPieces, clean_terms

LEXICAL_WEIGHT_ENGLISH = 0.4
LEXICAL_WEIGHT_KOREAN = 0.8
HEADING_SHARE = 0.5  # a question term found only in the piece's headings counts this much
_HANGUL = re.compile(r"[\uac00-\ud7a3\u1100-\u11ff\u3130-\u318f]")
_ENGLISH_WORD = re.compile(r"[a-z]{4,}")


@dataclass(frozen=True, eq=False)
class EvidenceCandidate:
    """A retrieved chunk with its stored pieces, and the BM25 terms of its headings (document
    title and section): a piece is read within its section ("First response within 15
    minutes." under "P1 - Critical")."""

    chunk_id: int
    text: str
    pieces: ChunkPieces
    heading_terms: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class PieceScores:
    """Both scores of every candidate piece; ``where[n]`` = (candidate index, piece index)."""

    dense: np.ndarray
    lexical: np.ndarray
    where: list[tuple[int, int]]


def is_korean(question_terms: Sequence[str]) -> bool:
    """Whether the question is Korean: one of its tokens holds Hangul."""
    return any(_HANGUL.search(t) for t in question_terms)


def lexical_weight(question_terms: Sequence[str]) -> float:
    """The fusion weight of the lexical score for this question (see the module doc)."""
    return LEXICAL_WEIGHT_KOREAN if is_korean(question_terms) else LEXICAL_WEIGHT_ENGLISH


def stem(term: str) -> str:
    """A light English suffix strip ("claims" -> "claim", "submitting" -> "submit"), so the
    question's word forms meet the document's; other terms (Korean morphemes are lemmas
    already, numbers) are unchanged."""
    if not _ENGLISH_WORD.fullmatch(term):
        return term
    if term.endswith("ies") and len(term) > 4:
        return term[:-3] + "y"  # policies -> policy
    for suffix in ("ing", "ed", "es", "s"):
        if term.endswith(suffix) and len(term) - len(suffix) >= 3 and not term.endswith("ss"):
            term = term[: -len(suffix)]
            if len(term) > 3 and term[-1] == term[-2] and term[-1] not in "lsz":
                term = term[:-1]  # submitt -> submit
            break
    return term


def lexical_scores(
    question_terms: Sequence[str],
    piece_terms: Sequence[Sequence[str]],
    heading_terms: Sequence[Sequence[str]] | None = None,
) -> np.ndarray:
    """Idf-weighted share of the question's distinct tokens found in each piece, in [0, 1];
    a token found only in the piece's headings (``heading_terms[i]``) counts
    ``HEADING_SHARE`` of its weight. The idf is over the pieces' own terms."""
    wanted = sorted({stem(t) for t in clean_terms(question_terms)})
    out = np.zeros(len(piece_terms), dtype=np.float32)
    if not wanted or not piece_terms:
        return out
    sets = [{stem(t) for t in terms} for terms in piece_terms]
    heads = [{stem(t) for t in terms} for terms in heading_terms or [()] * len(sets)]
    n = len(sets)
    idf = {}
    for term in wanted:
        df = sum(term in s for s in sets)
        idf[term] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    total = sum(idf.values())
    for i, s in enumerate(sets):
        found = sum(w for term, w in idf.items() if term in s)
        headed = sum(w for term, w in idf.items() if term not in s and term in heads[i])
        out[i] = (found + HEADING_SHARE * headed) / total
    return out


def score_pieces(
    question_vec: np.ndarray,
    question_terms: Sequence[str],
    candidates: Sequence[EvidenceCandidate],
    credited: Callable[[int, int], Sequence[str]] | None = None,
) -> PieceScores:
    """Dense and lexical scores of every piece of ``candidates`` (pieces whose offsets do not
    fit their chunk's text are skipped: they were stored for another text). ``credited(ci,
    j)``: question terms piece ``j`` of candidate ``ci`` counts as holding though it does not
    (the words naming an answer type it carries by its shape)."""
    q = np.asarray(question_vec, dtype=np.float32).reshape(-1)
    dense, terms, heads, where = [], [], [], []
    for ci, cand in enumerate(candidates):
        p = cand.pieces
        if not len(p):
            continue
        if p.vectors.shape[1] != q.shape[0]:
            raise ValueError(f"piece vectors have dim {p.vectors.shape[1]}, the question {len(q)}")
        fits = np.flatnonzero(p.ends <= len(cand.text))
        dense.append(p.vectors[fits].astype(np.float32) @ q)
        all_terms = p.piece_terms()
        terms += [
            (*all_terms[j], *credited(ci, int(j))) if credited else all_terms[j] for j in fits
        ]
        heads += [cand.heading_terms] * len(fits)
        where += [(ci, int(j)) for j in fits]
    dense_all = np.concatenate(dense) if dense else np.zeros(0, dtype=np.float32)
    return PieceScores(dense_all, lexical_scores(question_terms, terms, heads), where)
