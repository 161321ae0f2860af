"""Grounded answers: what the documents say, shown before the model speaks, and a check of what
the model said against them afterwards.

- ``card``: the best evidence sentences of the turn's cited chunks, verbatim, each with the
  citation number of its chunk (the "From the documents" card; sent before generation starts).
- ``check``: every answer sentence against the sources (``rag.verify``): a fact (number,
  amount, extension, e-mail address, URL, date) that no allowed source holds makes its sentence
  unsupported, and so does one that no source sentence says (``rag.support``: the content
  words, the appliance's embedder, negation; thresholds from ``chat.support_*``); a sentence
  that claims nothing, or restates the question, is not counted; an ``[n]`` that names no
  number of the conversation is flagged.
- ``extractive_answer``: the card as the whole answer (no generation).

The answer mode decides which of them a turn uses (``AnswerMode``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, get_args

from appliance.core.config import ChatConfig
from rag.evidence import EvidenceSpan
from rag.prompt import Citation
from rag.sentences import HANGUL
from rag.support import SupportThresholds, TextEmbedder
from rag.verify import AnswerCheck, verify_answer

# generative: the model's text, verified; grounded: the card, then the verified text;
# extractive: the card only (no generation, so it is instant)
AnswerMode = Literal["generative", "grounded", "extractive"]
ANSWER_MODES: tuple[AnswerMode, ...] = get_args(AnswerMode)


# Each profile's default answer mode, by measurement (``appliance bench quality --corpus`` on
# the real-documents sets, README § Answer modes). The bar for generating by default: the
# model's text states the asked fact for at least half of the questions, and at least 80% of
# its claims are supported. Below it the text after the card costs the reader time (and a CPU
# box 10-30 s of the engine per answer) while telling less than the card, so the default is
# the card alone and "Write an answer" generates on request. The CPU profile's SmolLM2-135M
# is below it; the GPU profiles' models are not measured here and keep "grounded" (the card,
# then the checked text) until a box's own run says otherwise (``chat.answer_mode``).
PROFILE_ANSWER_MODES: dict[str, AnswerMode] = {"cpu": "extractive"}
GENERATE_BAR_FACT_IN_TEXT, GENERATE_BAR_SUPPORTED = 0.5, 0.8


def default_answer_mode(profile: str) -> AnswerMode:
    """Each profile's default (``chat.answer_mode`` overrides it): ``PROFILE_ANSWER_MODES``,
    else "grounded". Every mode leads with the documents' own sentences."""
    return PROFILE_ANSWER_MODES.get(profile, "grounded")


@dataclass(frozen=True)
class CardSentence:
    """One verbatim sentence of a source, as the card shows it."""

    number: int  # the citation number of its chunk in this conversation
    chunk_id: int
    start: int  # character offsets into the chunk's text
    end: int
    text: str
    score: float


# below this fused score (rag.evidence: dense cosine and lexical share) a sentence is not shown
# as evidence: it answers another question. Measured on the sample handbook: questions it
# answers score 0.35-0.56 for their best sentence (Korean ones 0.39-0.51), off-topic ones
# ("What is the capital of France?") 0.05-0.07
MIN_EVIDENCE_SCORE = 0.25
NONE_FOUND = {
    "en": "No sentence in the documents answers this question.",
    "ko": "문서에서 이 질문에 답하는 문장을 찾지 못했습니다.",
}
# a question in a language the model cannot write is answered with the card and this, in
# the question's language (English where there is no translation), instead of broken text
CANNOT_WRITE = {
    "en": (
        "The answer model on this appliance does not write this language, so only the "
        "documents' own sentences are shown."
    ),
    "ko": (
        "이 어플라이언스의 답변 모델은 한국어로 답변을 쓰지 못하므로, 문서의 해당 문장만 "
        "보여 드립니다."
    ),
    "ja": "この装置の回答モデルは日本語で回答を書けないため、文書の該当する文のみを表示します。",
    "zh": "本设备的回答模型无法用中文撰写回答，因此仅显示文档中的相关句子。",
}


def cannot_write_answer(sentences: Sequence[CardSentence], language: str) -> str:
    """The answer of a turn whose question is in a language the model cannot write: the
    notice (the card above it holds the documents' sentences), or "not found" and the
    notice when no sentence answers it."""
    notice = CANNOT_WRITE.get(language, CANNOT_WRITE["en"])
    return notice if sentences else f"{NONE_FOUND.get(language, NONE_FOUND['en'])}\n\n{notice}"


def writes(model_languages: frozenset[str] | None, language: str) -> bool:
    """Whether a model that writes ``model_languages`` (None: any) can answer in
    ``language`` (``rag.language.script_language``; "und" always)."""
    return model_languages is None or language == "und" or language in model_languages


@dataclass(frozen=True)
class TurnGrounding:
    """What a turn is grounded on: its mode, its card, and the sources its answer is checked
    against (every citation number of the conversation, and this turn's retrieved texts); the
    question (a sentence that only restates it is not counted), the appliance's embedder and
    the support thresholds (``support_thresholds``) for the check. Without an embedder the
    check reads the words only (``SupportThresholds.lexical_min_overlap``)."""

    mode: AnswerMode
    card: tuple[CardSentence, ...]
    sources: Mapping[int, str]
    retrieved: tuple[str, ...]
    evidence_ms: float = 0.0
    question: str = ""
    embedder: TextEmbedder | None = None
    thresholds: SupportThresholds | None = None


def support_thresholds(chat: ChatConfig) -> SupportThresholds:
    """The sentence-support thresholds of the config's ``chat`` section (``rag.support``)."""
    return SupportThresholds(
        min_overlap=chat.support_min_overlap,
        min_overlap_facts=chat.support_min_overlap_facts,
        min_similarity=chat.support_min_similarity,
        korean_min_overlap=chat.support_korean_min_overlap,
        korean_min_overlap_facts=chat.support_korean_min_overlap_facts,
        korean_min_similarity=chat.support_korean_min_similarity,
        lexical_min_overlap=chat.support_lexical_min_overlap,
    )


def card(
    spans: Sequence[EvidenceSpan],
    citations: Sequence[Citation],
    min_score: float = MIN_EVIDENCE_SCORE,
) -> tuple[CardSentence, ...]:
    """The spans of chunks this turn cites, with their numbers, best first. A span of a chunk
    the prompt does not hold has no number to cite, and a weak one answers another question:
    both are left out."""
    numbers = {c.chunk_id: c.number for c in citations}
    return tuple(
        CardSentence(numbers[s.chunk_id], s.chunk_id, s.start, s.end, s.text, s.score)
        for s in spans
        if s.chunk_id in numbers and s.score >= min_score
    )


def sources_by_number(
    citations: Sequence[Citation], history: Sequence[Sequence[Mapping]] = ()
) -> dict[int, str]:
    """Citation number -> chunk text over the whole conversation: this turn's citations, and
    the stored citations of earlier answers (an answer may cite a chunk an earlier turn
    showed)."""
    out: dict[int, str] = {}
    for stored in history:
        for c in stored:
            number, text = c.get("number"), c.get("text")
            if isinstance(number, int) and isinstance(text, str):
                out[number] = text
    out.update({c.number: c.text for c in citations})
    return out


def check(answer: str, grounding: TurnGrounding) -> AnswerCheck:
    """Each sentence of ``answer`` against the turn's sources (every citation number of the
    conversation is a valid marker). Runs after generation: it adds nothing to TTFT."""
    return verify_answer(
        answer,
        grounding.sources,
        grounding.retrieved,
        set(grounding.sources),
        question=grounding.question,
        embedder=grounding.embedder,
        thresholds=grounding.thresholds,
    )


def extractive_answer(sentences: Sequence[CardSentence], question: str) -> str:
    """The card as the answer: one sentence a line, each with its citation; a plain "not
    found" (in the question's language) when no sentence of the sources answers it."""
    return card_answer([(s.text, s.number) for s in sentences], question)


def card_answer(sentences: Sequence[tuple[str, int]], question: str) -> str:
    """``extractive_answer`` of (text, number) pairs (a stored card's, too)."""
    if not sentences:
        return NONE_FOUND["ko" if HANGUL.search(question) else "en"]
    return "\n".join(f"{text} [{number}]" for text, number in sentences)


def stored_verdicts(result: AnswerCheck) -> dict[str, Any]:
    """The check as the ``messages`` row keeps it (JSON): the verdicts, the bad markers, and
    the counts the admin charts read."""
    return {
        "verdicts": [asdict(v) for v in result.sentences],
        "bad_markers": list(result.bad_markers),
        "claims_total": result.total,
        "claims_supported": result.supported,
    }
