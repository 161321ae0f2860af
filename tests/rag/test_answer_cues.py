"""Answer cues (what a question asks for) and their part in the evidence ranking: a piece
stating a value wins for "how much", a section heading counts for its pieces, and a
procedure's first step wins for "how do I"; with the real embedder and Kiwi."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rag.answer_cues import QuestionCues, is_first_step, question_cues, states_value
from rag.answer_type import question_types
from rag.bm25_tokenizer import Tokenizer
from rag.evidence import (
    FIRST_STEP_BONUS,
    VALUE_BONUS,
    EvidenceCandidate,
    lexical_scores,
    rank_evidence,
)
from rag.piece_vectors import build_pieces

STIPEND = (
    "For home office equipment, see the equipment stipend described in the remote work policy. "
    "Each hybrid employee receives a one-time equipment stipend of 500,000 KRW. "
    "Items bought with the stipend belong to you."
)
P1 = "First response within 15 minutes, 24 hours a day. Examples: email is down for everyone."
ESCALATION = (
    "For P1 incidents, the on-call engineer escalates to the manager if the incident is not "
    "under control. P1 tickets must be reported by phone."
)
STEPS = (
    "If your laptop is lost or stolen, report it immediately.\n\n"
    "1. Call the IT Helpdesk on extension 4357.\n"
    "2. Give the asset tag if you know it.\n"
    "3. If the device was stolen, report the theft to the police.\n"
)


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer()


def _cands(embedder, tokenizer, texts, headings=None):  # noqa: ANN001, ANN202
    _, pieces = build_pieces(embedder, texts, texts, tokenizer)
    headings = headings or [""] * len(texts)
    return [
        EvidenceCandidate(i, t, p, tuple(tokenizer.tokenize(h)))
        for i, (t, p, h) in enumerate(zip(texts, pieces, headings, strict=True))
    ]


def _spans(embedder, tokenizer, question, cands, cues=True):  # noqa: ANN001, ANN202
    """Every unit's (chunk, start) -> (text, fused score), with or without the question's value and
    step cues (its answer types left out: ``test_evidence_passages`` covers them)."""
    vec = embedder.embed([question])[0]
    chosen = replace(question_cues(question), types=frozenset()) if cues else None
    spans = rank_evidence(vec, tokenizer.tokenize(question), cands, k=99, cues=chosen)
    return {(s.chunk_id, s.start): (s.text, s.score) for s in spans}


def _scores(embedder, tokenizer, question, cands, cues=True):  # noqa: ANN001, ANN202
    """Every unit's text -> fused score (see ``_spans``)."""
    return dict(_spans(embedder, tokenizer, question, cands, cues).values())


def _assert_only_gains(embedder, tokenizer, question, cands, marker, bonus) -> None:  # noqa: ANN001
    """With the question's cues, the pieces holding ``marker`` score ``bonus`` more; every
    other piece scores as without them. A what-to-do question reads a case on into its first
    step (``rag.evidence_window``): a unit quoted inside a longer one is checked there."""
    plain = _spans(embedder, tokenizer, question, cands, cues=False)
    cued = _spans(embedder, tokenizer, question, cands)
    assert any(marker in text for text, _ in plain.values())
    for start, (text, score) in plain.items():
        gain = bonus if marker in text else 0.0
        if start not in cued:
            assert any(s[0] == start[0] and text in t for s, (t, _) in cued.items()), text
            continue
        assert cued[start][0].startswith(text), text
        assert cued[start][1] == pytest.approx(score + gain, abs=1e-5), text


@pytest.mark.parametrize(
    ("question", "cues"),
    [
        ("How much is the home office equipment stipend?", QuestionCues(True, False)),
        ("How fast does the helpdesk respond to a P1 incident?", QuestionCues(True, False)),
        ("What is the phone extension of the Travel Desk?", QuestionCues(True, False)),
        ("How do I reset my VPN password?", QuestionCues(False, True)),
        ("What should I do if my laptop is stolen?", QuestionCues(False, True)),
        ("What is tailgating?", QuestionCues(False, False)),
        ("What is the deadline for submitting an expense claim?", QuestionCues(True, False)),
        ("Which e-mail address do I contact with questions?", QuestionCues(True, False)),
        ("Who owns the items bought with the stipend?", QuestionCues(False, False)),
        ("사원증을 다시 발급받으려면 비용이 드나요?", QuestionCues(True, False)),
        ("화면은 몇 분 동안 사용하지 않으면 잠기나요?", QuestionCues(True, False)),
        ("VPN 비밀번호는 어떻게 재설정하나요?", QuestionCues(False, True)),
        # "어떻게 되나요" asks what something is, not how to do it
        ("출장 데스크 내선 번호가 어떻게 되나요?", QuestionCues(True, False)),
        ("비밀번호 규칙은 무엇인가요?", QuestionCues(False, False)),
    ],
)
def test_question_cues(question: str, cues: QuestionCues) -> None:
    got = question_cues(question)
    assert (got.wants_value, got.procedural) == (cues.wants_value, cues.procedural)
    assert got.types == question_types(question)  # the expected answer types ride along


def test_values_and_first_steps_are_recognised() -> None:
    assert states_value("a one-time stipend of 500,000 KRW")
    assert states_value("First response within 15 minutes.")
    assert states_value("go to https://id.hanbit.example/reset")
    assert states_value("재발급은 1회에 10,000원이 공제됩니다.")
    assert not states_value("see the equipment stipend described in the policy")
    assert not states_value("the H200 servers")  # a code is not a value
    first = STEPS.index("Call the")
    assert is_first_step(STEPS, first)
    assert not is_first_step(STEPS, STEPS.index("Give the"))
    assert not is_first_step(STEPS, 0)


def test_a_value_gains_its_bonus_for_a_how_much_question(embedder, tokenizer) -> None:  # noqa: ANN001
    cands = _cands(embedder, tokenizer, [STIPEND])
    question = "How much is the home office equipment stipend?"
    _assert_only_gains(embedder, tokenizer, question, cands, "500,000 KRW", VALUE_BONUS)
    # a question that asks for no value changes nothing
    other = "Who owns the items bought with the stipend?"
    assert _scores(embedder, tokenizer, other, cands) == _scores(
        embedder, tokenizer, other, cands, cues=False
    )


def test_a_heading_counts_for_its_pieces(embedder, tokenizer) -> None:  # noqa: ANN001
    question = "How fast does the helpdesk respond to a P1 critical incident?"
    bare = _cands(embedder, tokenizer, [P1, ESCALATION])
    headed = _cands(embedder, tokenizer, [P1, ESCALATION], ["IT Helpdesk\nP1 - Critical", ""])
    terms = tokenizer.tokenize(question)
    piece_terms = [bare[0].pieces.piece_terms()[0]]
    plain = lexical_scores(terms, piece_terms)[0]
    with_heading = lexical_scores(terms, piece_terms, [headed[0].heading_terms])[0]
    assert with_heading > plain  # "p1" and "critical" are in the heading, at a share
    headed_scores = _scores(embedder, tokenizer, question, headed)
    bare_scores = _scores(embedder, tokenizer, question, bare)
    first = next(t for t in bare_scores if "15 minutes" in t)
    assert headed_scores[first] > bare_scores[first]
    assert max(headed_scores, key=headed_scores.get) == first


def test_the_first_step_gains_its_bonus_for_a_how_to_question(embedder, tokenizer) -> None:  # noqa: ANN001
    cands = _cands(embedder, tokenizer, [STEPS])
    question = "What should I do if my company laptop is stolen?"
    _assert_only_gains(
        embedder, tokenizer, question, cands, "Call the IT Helpdesk", FIRST_STEP_BONUS
    )
