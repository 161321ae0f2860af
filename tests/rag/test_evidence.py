"""The evidence ranker on fixed passages, with the real embedder and Kiwi: English prose, Korean
prose and a table; spans are verbatim with exact offsets; a colon intro hands on its score."""

from __future__ import annotations

import numpy as np
import pytest

from rag.answer_cues import question_cues
from rag.bm25_tokenizer import Tokenizer
from rag.evidence import (
    LEXICAL_WEIGHT_ENGLISH,
    LEXICAL_WEIGHT_KOREAN,
    EvidenceCandidate,
    lexical_scores,
    lexical_weight,
    rank_evidence,
    stem,
)
from rag.piece_vectors import build_pieces

ENGLISH = (
    "Staff receive ten days of paid sick leave per calendar year. "
    "Unused sick leave does not carry over to the next year. "
    "The cafeteria on level 3 serves lunch from 11:30 to 13:30."
)
ENGLISH_2 = (
    "You can reach the Travel Desk at travel@hanbit.example or extension 3350. "
    "The Travel Desk books flights and hotels for business trips."
)
KOREAN = (
    "출장 데스크 연락처는 내선 3350, travel@hanbit.example 입니다. "
    "사원증을 잃어버리면 즉시 로비 보안데스크에 신고하세요. "
    "구내식당은 3층에 있습니다."
)
TABLE = (
    "The Travel Desk books hotels within these nightly limits:\n\n"
    "| Destination | Limit per night |\n|---|---|\n"
    "| Korea | 150,000 KRW |\n| Tier A cities abroad | USD 220 |\n| Other cities | USD 150 |\n"
)


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer()


def candidates(embedder, tokenizer, texts: list[str]) -> list[EvidenceCandidate]:  # noqa: ANN001
    header = [f"Handbook > Section {i}\n{t}" for i, t in enumerate(texts)]
    _, pieces = build_pieces(embedder, header, texts, tokenizer)
    return [
        EvidenceCandidate(100 + i, t, p) for i, (t, p) in enumerate(zip(texts, pieces, strict=True))
    ]


def best(embedder, tokenizer, question: str, texts: list[str], k: int = 2):  # noqa: ANN001, ANN201
    """The top ``k`` spans for ``question``, with its cues (as the appliance asks)."""
    cands = candidates(embedder, tokenizer, texts)
    vec = embedder.embed([question])[0]
    terms = tokenizer.tokenize(question)
    return rank_evidence(vec, terms, cands, k=k, cues=question_cues(question)), cands


def test_english_fact_sentence_first_with_exact_offsets(embedder, tokenizer) -> None:  # noqa: ANN001
    spans, cands = best(embedder, tokenizer, "How many sick days do I get?", [ENGLISH, ENGLISH_2])
    top = spans[0]
    assert top.chunk_id == 100 and top.kind == "sentence"
    assert top.text == "Staff receive ten days of paid sick leave per calendar year."
    assert ENGLISH[top.start : top.end] == top.text and top.start == 0
    assert len(spans) == 2 and spans[0].score >= spans[1].score

    spans, _ = best(
        embedder, tokenizer, "What is the Travel Desk's phone extension?", [ENGLISH, ENGLISH_2]
    )
    assert spans[0].chunk_id == 101 and "3350" in spans[0].text
    assert ENGLISH_2[spans[0].start : spans[0].end] == spans[0].text


def test_korean_question_leans_on_morphemes(embedder, tokenizer) -> None:  # noqa: ANN001
    question = "출장 데스크 내선 번호가 어떻게 되나요?"
    assert lexical_weight(tokenizer.tokenize(question)) == LEXICAL_WEIGHT_KOREAN
    assert lexical_weight(tokenizer.tokenize("What is the extension?")) == LEXICAL_WEIGHT_ENGLISH
    spans, _ = best(embedder, tokenizer, question, [KOREAN, ENGLISH])
    assert "내선 3350" in spans[0].text and spans[0].chunk_id == 100
    assert KOREAN[spans[0].start : spans[0].end] == spans[0].text

    spans, _ = best(embedder, tokenizer, "사원증을 잃어버리면 어디에 신고하나요?", [KOREAN])
    assert spans[0].text == "사원증을 잃어버리면 즉시 로비 보안데스크에 신고하세요."


def test_table_row_beats_its_colon_intro(embedder, tokenizer) -> None:  # noqa: ANN001
    spans, cands = best(embedder, tokenizer, "What is the nightly hotel limit in Korea?", [TABLE])
    kinds = [cands[0].pieces.kind(j) for j in range(len(cands[0].pieces))]
    assert kinds[0] == "sentence" and set(kinds[1:]) == {"row"}
    assert spans[0].kind == "row" and "150,000 KRW" in spans[0].text
    assert TABLE[spans[0].start : spans[0].end] == spans[0].text


def test_a_sentence_repeated_by_overlapping_chunks_is_shown_once(embedder, tokenizer) -> None:  # noqa: ANN001
    spans, _ = best(embedder, tokenizer, "How many sick days do I get?", [ENGLISH, ENGLISH], k=3)
    texts = [s.text for s in spans]
    assert len(texts) == len(set(texts)) == 3
    assert spans[0].text.startswith("Staff receive ten days")


def test_lexical_scores_weigh_rare_terms() -> None:
    pieces = [["vpn", "password", "reset"], ["vpn", "gateway"], ["vpn", "client"], []]
    scores = lexical_scores(["vpn", "reset"], pieces)
    assert scores[0] == pytest.approx(1.0)
    assert 0 < scores[1] == scores[2] < 0.5 and scores[3] == 0
    assert not lexical_scores([], pieces).any()
    assert stem("submitting") == stem("submit") == "submit" and stem("policies") == "policy"
    assert (
        stem("claims") == "claim" and stem("access") == "access" and stem("비밀번호") == "비밀번호"
    )
    assert lexical_scores(["submitting", "claims"], [["submit", "claim"]])[0] == pytest.approx(1.0)


def test_bad_input_is_refused(embedder, tokenizer) -> None:  # noqa: ANN001
    cands = candidates(embedder, tokenizer, [ENGLISH])
    with pytest.raises(ValueError, match="dim"):
        rank_evidence(np.ones(7, dtype=np.float32), ["sick"], cands)
    with pytest.raises(ValueError, match="weight"):
        rank_evidence(embedder.embed(["sick"])[0], ["sick"], cands, weight=1.5)
    assert rank_evidence(embedder.embed(["sick"])[0], ["sick"], cands, k=0) == []
    assert rank_evidence(embedder.embed(["sick"])[0], ["sick"], []) == []


# a reference manual: the sentence that names the setting shares the question's words, the
# value is stated two sentences on; an option on its own line before what it does; a shortcut
# table of key lines, each described by the line after it
MANUAL = (
    "shared_buffers (integer)\n"
    "Sets the amount of memory the database server uses for shared memory buffers. "
    "If this value is specified without units, it is taken as blocks. "
    "The default is typically 128 megabytes (128MB).\n"
    "-k\n--data-checksums\nUse checksums on data pages to help detect corruption.\n"
)
SHORTCUTS = (
    "Ctrl + F10\n단락 기호 표시\nCtrl + F12\n표 삽입\nShift + F12\n글머리 기호 목록 켜기/끄기\n"
)


def test_the_sentence_holding_the_asked_value_is_shown_first(embedder, tokenizer) -> None:  # noqa: ANN001
    question = "How much memory does the server use for shared memory buffers by default?"
    spans, _ = best(embedder, tokenizer, question, [MANUAL])
    assert "128 megabytes" in spans[0].text
    assert MANUAL[spans[0].start : spans[0].end] == spans[0].text
    # the naming sentence still follows: without the cues it would come first
    plain = rank_evidence(
        embedder.embed([question])[0],
        tokenizer.tokenize(question),
        candidates(embedder, tokenizer, [MANUAL]),
    )
    # (read with its term, the label line above it)
    assert plain[0].text.startswith("shared_buffers (integer)\nSets the amount of memory")


def test_an_option_label_is_quoted_with_what_it_does(embedder, tokenizer) -> None:  # noqa: ANN001
    spans, _ = best(embedder, tokenizer, "Which option turns on checksums on data pages?", [MANUAL])
    # both spellings of the option: the term's label lines above its definition
    assert spans[0].text == (
        "-k\n--data-checksums\nUse checksums on data pages to help detect corruption."
    )
    assert MANUAL[spans[0].start : spans[0].end] == spans[0].text


def test_a_korean_shortcut_line_is_quoted_with_its_description(embedder, tokenizer) -> None:  # noqa: ANN001
    spans, _ = best(embedder, tokenizer, "표를 삽입하는 단축키는 무엇인가요?", [SHORTCUTS])
    assert spans[0].text == "Ctrl + F12\n표 삽입"


def test_a_colon_before_code_keeps_its_score(embedder, tokenizer) -> None:  # noqa: ANN001
    # a colon introduces a list only when list items or table rows follow it
    text = (
        "The decimal module has a user alterable precision (defaulting to 28 places) which can "
        "be as large as needed for a given problem:\n"
        ">>> getcontext().prec = 6\n"
        "Decimal numbers can be represented exactly.\n"
    )
    spans, _ = best(
        embedder, tokenizer, "What precision does the decimal module default to?", [text]
    )
    assert "28 places" in spans[0].text
