"""Sentence-level support (issue #32): an answer sentence is supported only when one source
sentence says it; invented steps and broken Korean are not, a copied sentence is, and a
restated question is not counted."""

from __future__ import annotations

import pytest

from rag.support import SupportThresholds, matches, source_windows
from rag.support_terms import terms
from rag.verify import verify_answer

VPN = """Because your VPN password is your Hanbit account password, resetting one resets the \
other. You can do this yourself in a few minutes through the self-service portal, at any time \
of day, without contacting the helpdesk.

Before you start, have your phone with the HanbitPass app ready.

1. On any device with a web browser, go to https://id.hanbit.example/reset. You do not need to \
be connected to the VPN; the reset portal is reachable from the public internet.
2. Enter your username and approve the push notification in HanbitPass.
3. Choose a new password that meets the rules in the Information Security Policy.
"""
LEAVE_KO = """## 연차 휴가 요약

- 입사 첫해에는 1개월 개근 시 1일씩, 최대 11일의 유급 연차가 생깁니다.
- 1년 근속 후에는 연 15일의 유급 연차가 부여되고, 이후 2년마다 1일씩 늘어나 최대 25일까지 받을 \
수 있습니다.
- 연차는 종일 또는 반일 단위로 사용할 수 있습니다.
"""
# the answer the issue quotes: invented steps, "verified: 6 of 7 sentences" before
VPN_ANSWER = (
    "To reset your VPN password, follow these steps: [1]\n"
    "1. Open the HanbitConnect app and click on the settings icon in the top right corner.\n"
    "2. Select the reset option and wait for the time frame to pass.\n"
    "3. If someone tries to steal your device after that time frame, your password is reset "
    "automatically.\n"
    "4. Enter the new password twice and save it.\n"
    "5. Restart your laptop so that the VPN uses the new password."
)


def check(answer: str, source: str, question: str, embedder: object = None):  # noqa: ANN201
    return verify_answer(answer, {1: source}, [source], {1}, question=question, embedder=embedder)


@pytest.mark.parametrize("with_embedder", [False, True])
def test_the_issues_answers_are_not_supported(with_embedder: bool, request) -> None:  # noqa: ANN001
    embedder = request.getfixturevalue("embedder") if with_embedder else None
    vpn = check(VPN_ANSWER, VPN, "How do I reset my VPN password?", embedder)
    claims = [s for s in vpn.sentences if s.claim]
    assert claims and not any(s.supported for s in claims), [s.reason for s in claims]
    assert vpn.supported == 0
    ko = check("연차 휴가는 며칠인 것이 아니하다.", LEAVE_KO, "연차 휴가는 며칠인가요?", embedder)
    assert (ko.supported, ko.total) == (0, 1), ko.sentences


@pytest.mark.parametrize("with_embedder", [False, True])
def test_a_sentence_copied_from_a_source_is_supported(with_embedder: bool, request) -> None:  # noqa: ANN001
    embedder = request.getfixturevalue("embedder") if with_embedder else None
    answer = "On any device with a web browser, go to https://id.hanbit.example/reset [1]."
    en = check(answer, VPN, "How do I reset my VPN password?", embedder)
    assert (en.supported, en.total) == (1, 1), en.sentences
    ko = check(
        "1년 근속 후에는 연 15일의 유급 연차가 부여됩니다 [1].",
        LEAVE_KO,
        "연차 휴가는 며칠인가요?",
        embedder,
    )
    assert (ko.supported, ko.total) == (1, 1), ko.sentences


def test_a_restated_question_is_not_counted() -> None:
    result = check(
        "To reset your VPN password, follow these steps:\n"
        "1. On any device with a web browser, go to https://id.hanbit.example/reset [1].",
        VPN,
        "How do I reset my VPN password?",
    )
    first, second = result.sentences
    assert (first.claim, first.reason) == (False, "restates the question")
    assert second.claim and second.supported
    assert (result.supported, result.total) == (1, 1)
    ko = check("연차 휴가가 며칠인지 알려 드리겠습니다.", LEAVE_KO, "연차 휴가는 며칠인가요?")
    assert ko.total == 0
    # without the question, the same sentence is a claim (and no source sentence says it)
    assert check("연차 휴가가 며칠인지 알려 드리겠습니다.", LEAVE_KO, "").total == 1


def test_words_scattered_over_a_chunk_support_nothing() -> None:
    # every word is in the chunk, but no sentence of it says this
    answer = "The helpdesk portal resets your phone in a few minutes [1]."
    verdict = check(answer, VPN, "").sentences[0]
    assert verdict.claim and not verdict.supported
    assert verdict.reason.startswith("no source supports it (overlap")


def test_a_dropped_negation_is_not_supported() -> None:
    answer = "You need to be connected to the VPN to reach the reset portal [1]."
    verdict = check(answer, VPN, "").sentences[0]
    assert not verdict.supported and "negated differently" in verdict.reason
    kept = check("You do not need to be connected to the VPN [1].", VPN, "").sentences[0]
    assert kept.supported, kept.reason


def test_windows_are_pieces_and_adjacent_pairs() -> None:
    windows = source_windows("First rule here. Second rule there.\n\n- A list item.")
    assert [w.text for w in windows] == [
        "First rule here.",
        "Second rule there.",
        "A list item.",
        "First rule here. Second rule there.",
        "Second rule there. A list item.",
    ]
    found = matches("Second rule there.", terms(["Second rule there."])[0], ["Second rule there."])
    assert found[0].overlap == 1.0 and found[0].similarity is None and found[0].negation_ok


def test_thresholds_are_checked() -> None:
    with pytest.raises(ValueError, match="min_similarity"):
        SupportThresholds(min_similarity=1.5)
