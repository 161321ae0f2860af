"""The pure scoring of ``appliance bench quality``: hits, loops, unflagged inventions, and the
per-mode summary of a run's answers.

- A hit: any accepted answer string occurs in the shown text once both are normalised
  (whitespace collapsed to single spaces, case folded; nothing else), the rule ``qa.json``'s
  answers are written for (README, the sample corpus).
- A loop: a sentence of at least four words said twice, or the same run of eight words three
  times or more (what the small model does when it gets stuck).
- An unflagged invention: a sentence of the answer that states a fact (``rag.verify``'s
  ``extract_facts``) that no retrieved source holds, while its verdict says supported. The
  reading of a source here is independent of ``rag.facts``' own matcher and as liberal: the
  fact's text, or every digit run of it, occurs in the source.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from rag.sentences import HANGUL
from rag.verify import AnswerCheck, extract_facts

LOOP_SENTENCE_WORDS = 4
LOOP_RUN_WORDS = 8
LOOP_RUN_TIMES = 3

_SENTENCE_END = re.compile(r"(?<=[.!?。…])\s+|\n+")
_WORD = re.compile(r"\w+")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_DIGITS = re.compile(r"\d+")
_SCHEME = re.compile(r"^(?:https?://)?(?:www\.)?")


def korean(item: dict) -> bool:
    """Whether a QA item's question is Korean (it holds Hangul)."""
    return bool(HANGUL.search(item["question"]))


def norm(text: str) -> str:
    """Whitespace collapsed to single spaces, case folded (the grader's rule)."""
    return " ".join(text.split()).casefold()


def hit(text: str, answers: Sequence[str]) -> bool:
    """Whether any accepted answer occurs in ``text`` (both normalised)."""
    shown = norm(text)
    return any(norm(a) in shown for a in answers if a.strip())


def loops(text: str) -> bool:
    """Whether ``text`` loops: a sentence of >= 4 words repeated, or one 8-word run 3+ times."""
    sentences = [_WORD.findall(s.casefold()) for s in _SENTENCE_END.split(text)]
    said = Counter(tuple(w) for w in sentences if len(w) >= LOOP_SENTENCE_WORDS)
    if any(n >= 2 for n in said.values()):
        return True
    words = _WORD.findall(text.casefold())
    runs = Counter(
        tuple(words[i : i + LOOP_RUN_WORDS]) for i in range(len(words) - LOOP_RUN_WORDS + 1)
    )
    return any(n >= LOOP_RUN_TIMES for n in runs.values())


def _canonical(text: str) -> str:
    return _THOUSANDS.sub("", norm(text)).rstrip(".,;:!?)/")


def _digit_runs(text: str) -> set[str]:
    return {d.lstrip("0") or "0" for d in _DIGITS.findall(_THOUSANDS.sub("", text))}


def in_sources(fact: str, sources: Sequence[str]) -> bool:
    """Whether a source holds ``fact``: its canonical text (normalised, thousand separators,
    a URL's scheme and trailing punctuation or slash dropped) occurs in it, or every digit run
    of the fact is a digit run of that one source (leading zeros aside: "03" is "3")."""
    want = _SCHEME.sub("", _canonical(fact))
    digits = _digit_runs(fact)
    for source in sources:
        text = _canonical(source)
        if want and want in text:
            return True
        if digits and digits <= _digit_runs(text):
            return True
    return False


@dataclass(frozen=True)
class Invention:
    """A sentence shown as supported that holds a fact no retrieved source holds."""

    sentence: str
    facts: tuple[str, ...]


def unflagged_inventions(
    answer: str, check: AnswerCheck | None, sources: Sequence[str]
) -> list[Invention]:
    """The answer's sentences whose verdict says supported though a fact of theirs is in no
    source (this must be none: an invented number shown without a flag)."""
    if check is None:
        return []
    out = []
    for verdict in check.sentences:
        if not verdict.supported:
            continue  # flagged: the reader sees the mark
        sentence = answer[verdict.start : verdict.end]
        absent = tuple(f for f in extract_facts(sentence) if not in_sources(f, sources))
        if absent:
            out.append(Invention(sentence.strip(), absent))
    return out


@dataclass(frozen=True)
class Outcome:
    """One question asked in one mode, as scored."""

    korean: bool
    shown_first: bool  # the fact in the card (if any), else in the answer
    anywhere: bool  # the fact in the card or the answer
    gold_cited_first: bool  # citations[0] is the gold file
    looped: bool
    inventions: tuple[Invention, ...]
    latency_s: float  # ask -> DoneEvent
    ttft_s: float  # ask -> first DeltaEvent
    error: str = ""
    question: str = ""
    stopped: bool = False  # the repeat guard stopped the answer (``rag.repeats``)
    in_card: bool = False  # the fact in the evidence card
    in_text: bool = False  # the fact in the generated text
    in_chunks: bool = False  # the fact in the retrieved chunks (every citation's text)
    gold_cited: bool = False  # one of the citations is the gold file
    claims_supported: int = 0  # the generated text's claims the check found supported
    claims_total: int = 0  # the generated text's claims (sentences that state something)
    generated: bool = True  # the engine wrote the answer (not the card alone, nor a notice)


def score(
    item: dict,
    card_text: str,
    answer: str,
    first_source: str,
    check: AnswerCheck | None,
    sources: Sequence[str],
    timings: tuple[float, float],
    korean: bool,
    stopped: bool = False,
    chunks: Sequence[str] | None = None,
    cited: Sequence[str] = (),
    generated: bool = True,
) -> Outcome:
    """The outcome of one asked question (``timings``: latency and TTFT in seconds;
    ``stopped``: the repeat guard ended the answer; ``chunks``: the texts of this turn's
    retrieved chunks, ``sources`` where not given; ``cited``: every citation's file;
    ``generated``: the engine wrote ``answer``, else the generated-text columns count
    nothing of it)."""
    answers = item["answers"]
    shown = card_text if card_text.strip() else answer
    retrieved = sources if chunks is None else chunks
    return Outcome(
        korean,
        hit(shown, answers),
        hit(card_text + "\n" + answer, answers),
        first_source == item["gold_file"],
        loops(answer),
        tuple(unflagged_inventions(answer, check, sources)),
        timings[0],
        timings[1],
        question=item["question"],
        stopped=stopped,
        in_card=hit(card_text, answers),
        in_text=generated and hit(answer, answers),
        in_chunks=any(hit(c, answers) for c in retrieved),
        gold_cited=item["gold_file"] in cited,
        claims_supported=check.supported if check is not None and generated else 0,
        claims_total=check.total if check is not None and generated else 0,
        generated=generated,
    )


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100, linear), 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def share(n: int, of: int) -> str:
    """``n/of (pct%)``; ``-`` when there is nothing to count."""
    return f"{n}/{of} ({100 * n / of:.0f}%)" if of else "-"


def summary_row(label: str, outcomes: Sequence[Outcome]) -> tuple[str, ...]:
    """One table row for one mode and one language."""
    ok = [o for o in outcomes if not o.error]
    n = len(ok)
    return (
        label,
        share(sum(o.shown_first for o in ok), n),
        share(sum(o.anywhere for o in ok), n),
        share(sum(o.gold_cited_first for o in ok), n),
        str(sum(o.looped for o in ok)),
        str(sum(o.stopped for o in ok)),
        str(sum(len(o.inventions) for o in ok)),
        *timing_cells(outcomes),
    )


def timing_cells(outcomes: Sequence[Outcome]) -> tuple[str, str, str, str]:
    """The last cells of a row: latency p50 and p95, TTFT p50 (of the answered), errors."""
    ok = [o for o in outcomes if not o.error]
    lat = [o.latency_s for o in ok]
    ttft = [o.ttft_s for o in ok]
    return (
        f"{percentile(lat, 50):.2f} s",
        f"{percentile(lat, 95):.2f} s",
        f"{statistics.median(ttft):.3f} s" if ttft else "-",
        str(len(outcomes) - len(ok)),
    )


SUMMARY_HEADERS = (
    "mode",
    "fact shown first",
    "fact anywhere",
    "1st citation gold",
    "loops",
    "repeats stopped",
    "unflagged inventions",
    "latency p50",
    "latency p95",
    "TTFT p50",
    "errors",
)
