"""``appliance bench support``: how often "supported" is right, on labelled answer sentences.

The labels (``appliance/bench/support_labels``: ``dev.jsonl``, ``heldout.jsonl`` and the source
texts they cite, ``sources.jsonl``) are answer sentences about the sample handbook, each with
the source texts it is checked against, labelled ``supported`` (a source it cites says it),
``unsupported`` or ``no_claim`` (states nothing, or restates the question). ``dev`` holds the
sentences of ``qa.json``'s questions, ``heldout`` those of ``qa_heldout.json``'s; the
thresholds are tuned on ``dev`` only (``--calibrate``).

A sentence counts as predicted "supported" when the check counts it as a claim and supports it;
precision and recall are those of the label ``supported`` (a ``no_claim`` sentence counted as
supported is a false positive: the panel would call it supported). Rows:

- ``before``: the rule this check replaced (facts, then the share of the sentence's content
  words found anywhere in the allowed sources: 0.5, or 0.25 when its facts were found);
- ``words only``: the sentence-level rule without an embedder (``lexical_min_overlap``);
- ``words + embedder``: the sentence-level rule with the appliance's embedder (the default).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np

from appliance.core.config import AppConfig
from appliance.core.services.grounding import support_thresholds
from rag.facts import SourceFacts, find_facts
from rag.support import SupportThresholds, TextEmbedder, is_korean, matches
from rag.support_terms import COURTESY_TERMS, terms
from rag.verify import answer_pieces, extract_facts, verify_answer

LABELS = Path(__file__).parent / "support_labels"
SPLITS = ("dev", "heldout")
LANGUAGES = ("en", "ko")
TARGET_PRECISION = 0.95  # on dev, so that held-out keeps 0.9 with a margin


@dataclass(frozen=True)
class Example:
    """One labelled answer sentence."""

    id: str
    split: str
    language: str
    question: str
    sentence: str
    sources: tuple[str, ...]  # the texts it is checked against
    label: str  # supported | unsupported | no_claim
    origin: str  # model | copied | paraphrased | distorted | other_source | restated


def load(split: str, folder: Path = LABELS) -> list[Example]:
    """The labelled sentences of one split, with their source texts."""
    texts = {}
    for line in (folder / "sources.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        texts[row["id"]] = row["text"]
    out = []
    for line in (folder / f"{split}.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        out.append(
            Example(
                row["id"],
                split,
                row["language"],
                row["question"],
                row["sentence"],
                tuple(texts[s] for s in row["sources"]),
                row["label"],
                row["origin"],
            )
        )
    return out


def _clean(sentence: str) -> str:
    """The sentence without its ``[n]`` markers (the labels carry its allowed sources)."""
    import re

    return re.sub(r"\[\d{1,4}(?:\s*[,;]\s*\d{1,4})*\]", " ", sentence)


def predict(
    ex: Example, embedder: TextEmbedder | None, thresholds: SupportThresholds | None = None
) -> bool:
    """Whether the check counts ``ex`` as a supported claim."""
    check = verify_answer(
        _clean(ex.sentence),
        {},
        list(ex.sources),
        set(),
        question=ex.question,
        embedder=embedder,
        thresholds=thresholds,
    )
    return check.total > 0 and check.supported == check.total


def predict_before(ex: Example) -> bool:
    """The replaced rule: facts, then content words pooled over every allowed source; each
    sentence of ``ex`` (as ``rag.verify`` splits it) judged alone."""
    clean = _clean(ex.sentence)
    pool = frozenset().union(*terms(list(ex.sources))) if ex.sources else frozenset()
    readers = [SourceFacts.of(t) for t in ex.sources]
    claims = supported = 0
    for piece in answer_pieces(clean):
        text = clean[piece.start : piece.end]
        facts = [f for f in find_facts(text) if f.text in extract_facts(text)]
        sentence_terms = terms([text])[0]
        wanted = sentence_terms - COURTESY_TERMS
        if not facts and not wanted:
            continue  # no claim: not counted
        claims += 1
        if any(not any(r.holds(f) for r in readers) for f in facts) or not ex.sources:
            continue
        wanted = wanted or sentence_terms
        overlap = len(wanted & pool) / len(wanted) if wanted else 1.0
        supported += overlap >= (0.25 if facts else 0.5)
    return claims > 0 and supported == claims


@dataclass(frozen=True)
class Score:
    n: int
    positives: int
    tp: int
    fp: int

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else float("nan")

    @property
    def recall(self) -> float:
        return self.tp / self.positives if self.positives else float("nan")

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def score(examples: Sequence[Example], predicted: Sequence[bool]) -> Score:
    gold = [e.label == "supported" for e in examples]
    tp = sum(1 for g, p in zip(gold, predicted, strict=True) if g and p)
    fp = sum(1 for g, p in zip(gold, predicted, strict=True) if p and not g)
    return Score(len(examples), sum(gold), tp, fp)


# -- calibration (dev only) -----------------------------------------------------------------


@dataclass(frozen=True)
class _Features:
    """What the thresholds act on, computed once per example: per claim piece, the window
    arrays; ``fixed`` when the verdict does not depend on them (no claim, a missing fact)."""

    fixed: bool | None
    pieces: tuple[tuple[bool, bool, np.ndarray, np.ndarray, np.ndarray], ...]  # korean, facts,
    # overlap, similarity (zeros without an embedder), negation_ok


def _features(ex: Example, embedder: TextEmbedder | None) -> _Features:
    clean = _clean(ex.sentence)
    loose = SupportThresholds(0, 0, 0, 0, 0, 0, 0)
    check = verify_answer(
        clean, {}, list(ex.sources), set(), question=ex.question, thresholds=loose
    )
    if check.total == 0 or check.supported < check.total:
        return _Features(False, ())
    pieces = []
    for piece, verdict in zip(answer_pieces(clean), check.sentences, strict=True):
        if not verdict.claim:
            continue
        text = clean[piece.start : piece.end]
        vector = embedder.embed([" ".join(text.split())])[0] if embedder else None
        found = matches(text, terms([text])[0], list(ex.sources), embedder, vector)
        pieces.append(
            (
                is_korean(text),
                bool(extract_facts(text)),
                np.asarray([m.overlap for m in found]),
                np.asarray([m.similarity or 0.0 for m in found]),
                np.asarray([m.negation_ok for m in found]),
            )
        )
    return _Features(None, tuple(pieces))


def _decide(f: _Features, overlap: float, facts: float | tuple[float, float], sim: float) -> bool:
    """``facts``: one threshold, or (English, Korean) ones, capped by ``overlap`` (the
    words-only rule)."""
    if f.fixed is not None:
        return f.fixed
    for korean, has_facts, ov, sims, neg in f.pieces:
        if isinstance(facts, tuple):
            need = min(overlap, facts[korean]) if has_facts else overlap
        else:
            need = facts if has_facts else overlap
        if not (neg & (ov >= need - 1e-9) & (sims >= sim - 1e-9)).any():
            return False
    return bool(f.pieces)


def calibrate(
    dev: Sequence[Example], embedder: TextEmbedder, base: SupportThresholds
) -> tuple[SupportThresholds, list[str]]:
    """The thresholds with the best dev recall at dev precision >= ``TARGET_PRECISION``, per
    language (with the embedder) and for the words-only rule (both languages)."""
    grid_o = [round(float(x), 2) for x in np.arange(0.5, 1.0001, 0.05)]
    grid_f = [round(float(x), 2) for x in np.arange(0.3, 1.0001, 0.1)]
    grid_s = [0.0, *(round(float(x), 2) for x in np.arange(0.3, 0.9001, 0.05))]
    lines = []
    chosen: dict[str, Any] = {}
    for lang in LANGUAGES:
        subset = [e for e in dev if e.language == lang]
        feats = [_features(e, embedder) for e in subset]
        best = _search(subset, feats, product(grid_o, grid_f, grid_s))
        chosen[lang] = best
        lines.append(f"calibrated {lang}: overlap, overlap with facts, similarity = {best}")
    (o, f, s), (ko, kf, ks) = chosen["en"], chosen["ko"]
    feats = [_features(e, None) for e in dev]
    lexical = _search(dev, feats, product(grid_o, [(f, kf)], [0.0]))
    lines.append(f"calibrated words only: overlap = {lexical[0]}")
    found = replace(
        base,
        min_overlap=o,
        min_overlap_facts=f,
        min_similarity=s,
        korean_min_overlap=ko,
        korean_min_overlap_facts=kf,
        korean_min_similarity=ks,
        lexical_min_overlap=lexical[0],
    )
    return found, lines


def _search(examples: Sequence[Example], feats: Sequence[_Features], grid: Any) -> tuple[Any, ...]:
    best: tuple[Any, ...] | None = None
    best_key = (-1.0, -1.0)
    for o, f, s in grid:
        result = score(examples, [_decide(x, o, f, s) for x in feats])
        if result.tp + result.fp == 0 or result.precision < TARGET_PRECISION:
            continue
        key = (result.recall, result.precision)  # then the strictest on ties (order of grid)
        if key > best_key:
            best, best_key = (o, f, s), key
    return best or (1.0, 1.0, 0.9)


# -- the report ------------------------------------------------------------------------------


def _cell(s: Score) -> str:
    shown = f"{s.tp:3d}/{s.tp + s.fp:<3d}"
    return f"{s.precision:5.2f} {s.recall:5.2f} {s.f1:5.2f} {shown} {s.positives:3d}"


def report(
    data: dict[str, list[Example]], rules: Sequence[tuple[str, Callable[[Example], bool]]]
) -> list[str]:
    """One row per rule, split and language: precision, recall, F1, true/predicted, labelled."""
    head = f"{'rule':<18} {'split':<8} {'lang':<4} {'n':>4}   P     R     F1   tp/pred  pos"
    lines = [head, "-" * len(head)]
    for name, rule in rules:
        for split in SPLITS:
            predicted = {e.id: rule(e) for e in data[split]}
            for lang in (*LANGUAGES, "all"):
                subset = [e for e in data[split] if lang in (e.language, "all")]
                s = score(subset, [predicted[e.id] for e in subset])
                lines.append(f"{name:<18} {split:<8} {lang:<4} {s.n:>4}  {_cell(s)}")
    return lines


def counts(data: dict[str, list[Example]]) -> list[str]:
    """How many labels, by split, origin, language and label."""
    table: dict[tuple[str, str, str, str], int] = {}
    for split, examples in data.items():
        for e in examples:
            key = (split, e.origin, e.language, e.label)
            table[key] = table.get(key, 0) + 1
    return [
        f"  {s:<8} {o:<13} {lang:<3} {lab:<12} {n:>4}"
        for (s, o, lang, lab), n in sorted(table.items())
    ]


def mistakes(examples: Sequence[Example], rule: Callable[[Example], bool]) -> list[str]:
    """The sentences ``rule`` gets wrong: FP (called supported) and FN (missed)."""
    out = []
    for e in examples:
        said, gold = rule(e), e.label == "supported"
        if said != gold:
            kind = "FP" if said else "FN"
            out.append(f"{kind} {e.id} [{e.origin}/{e.label}] {' '.join(e.sentence.split())}")
    return out


class _Memo:
    """The embedder with a memory: every example is judged several times (one per rule), and
    one batch up front embeds every answer sentence faster than one call each."""

    def __init__(self, inner: TextEmbedder) -> None:
        self.inner, self.name, self.known = inner, inner.name, {}

    def embed(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self.known]
        if todo:
            self.known.update(zip(todo, self.inner.embed(todo), strict=True))
        return np.asarray([self.known[t] for t in texts], dtype=np.float32)

    def warm(self, examples: Sequence[Example]) -> None:
        texts = []
        for e in examples:
            clean = _clean(e.sentence)
            texts += [" ".join(clean[p.start : p.end].split()) for p in answer_pieces(clean)]
        self.embed(texts)


def main(argv: list[str], config: AppConfig) -> int:
    """``appliance bench support [--calibrate] [--labels DIR]``."""
    parser = argparse.ArgumentParser(prog="appliance bench support")
    parser.add_argument(
        "--calibrate",
        action="store_true",
        help=f"search the thresholds on dev (best recall at precision >= {TARGET_PRECISION}) "
        "and report with them too",
    )
    parser.add_argument("--labels", type=Path, default=LABELS, help="the labels' folder")
    parser.add_argument(
        "--errors", action="store_true", help="list the last rule's mistakes on dev"
    )
    args = parser.parse_args(argv)
    from rag.embeddings import Embedder

    started = time.perf_counter()
    data = {split: load(split, args.labels) for split in SPLITS}
    embedder = _Memo(Embedder(config.rag.embedding_model_path))
    embedder.warm([e for split in SPLITS for e in data[split]])
    thresholds = support_thresholds(config.chat)
    rules: list[tuple[str, Callable[[Example], bool]]] = [
        ("before", predict_before),
        ("words only", lambda e: predict(e, None, thresholds)),
        ("words + embedder", lambda e: predict(e, embedder, thresholds)),
    ]
    print("\n".join([f"labels: {args.labels}", *counts(data)]), flush=True)
    if args.calibrate:
        found, notes = calibrate(data["dev"], embedder, thresholds)
        print("\n".join(notes), flush=True)
        rules += [
            ("calibrated, words", lambda e: predict(e, None, found)),
            ("calibrated, +emb", lambda e: predict(e, embedder, found)),
        ]
    lines = report(data, rules)
    if args.errors:
        lines += mistakes(data["dev"], rules[-1][1])
    lines.append(f"total {time.perf_counter() - started:.0f} s")
    print("\n".join(lines))
    return 0
