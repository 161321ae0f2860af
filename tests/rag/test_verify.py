"""Answer verification: invented facts are flagged, quoted ones pass, bad markers are listed."""

from __future__ import annotations

import pytest

from rag.facts import SourceFacts, find_facts
from rag.verify import AnswerCheck, SentenceVerdict, extract_facts, verify_answer

TRAVEL = (
    "Once approved, the request goes to the Travel Desk, which books flights, hotels, and rail "
    "tickets for you. You can reach the Travel Desk at travel@hanbit.example or extension 3350. "
    "Submit requests for international travel at least 14 days before departure."
)
EXPENSES = (
    'All expense claims are submitted in the "Spend" section of the People portal at '
    "https://people.hanbit.example.\n\n"
    "3. Photograph or upload the itemised receipt for every expense above 20,000 KRW.\n"
    "You must submit expense claims within 30 days of the date of the expense. Claims fully "
    "approved by the 20th of the month are included in that month's pay. The 2026 pay dates "
    "are listed from March 25, 2026."
)
LEAVE_KO = (
    "유급 병가는 연 10일이며, 연속 3일을 넘는 경우 진단서를 제출합니다. "
    "국내 숙박 출장 일비는 하루 50,000원입니다. 헬프데스크는 내선 4357입니다."
)
SOURCES = {1: TRAVEL, 2: EXPENSES}


def check(answer: str, **kwargs: object) -> AnswerCheck:
    return verify_answer(answer, SOURCES, list(SOURCES.values()), {1, 2}, **kwargs)  # type: ignore[arg-type]


def only(result: AnswerCheck) -> SentenceVerdict:
    assert len(result.sentences) == 1
    return result.sentences[0]


def test_invented_extension_is_flagged_and_quoted_one_passes() -> None:
    answer = "The Travel Desk's phone extension is 12345 [1]."
    bad = only(check(answer))
    assert not bad.supported
    assert bad.unsupported_facts == ("12345",)
    assert bad.reason == "fact not in sources: 12345"
    assert bad.cites == (1,)
    assert (bad.start, bad.end) == (0, len(answer))

    good = only(check("You can reach the Travel Desk at extension 3350 [1]."))
    assert good.supported and good.reason == "ok" and good.unsupported_facts == ()


@pytest.mark.parametrize(
    ("answer", "fact"),
    [
        ("Write to the Travel Desk at desk@hanbit.example [1].", "desk@hanbit.example"),
        (
            "Claims go to the People portal at https://people.hanbit.example/claims [2].",
            "https://people.hanbit.example/claims",
        ),
        ("The 2026 pay dates are listed from March 26, 2026 [2].", "March 26, 2026"),
        ("Upload the receipt for every expense above 50,000 KRW [2].", "50,000"),
        ("Submit expense claims within 45 days of the expense [2].", "45"),
        ("Submit expense claims within 30 days of the expense, 95% of them [2].", "95"),
        # an integer written as a decimal is not stated by any "3" of the source (the bench saw
        # "The phone extension of the Travel Desk is 3.0" pass on an unrelated "3.")
        ("The Travel Desk's phone extension is 3.0 [2].", "3.0"),
    ],
)
def test_invented_email_url_date_amount_are_flagged(answer: str, fact: str) -> None:
    verdict = only(check(answer))
    assert not verdict.supported
    assert verdict.unsupported_facts == (fact,)


@pytest.mark.parametrize(
    "answer",
    [
        "Write to the Travel Desk at Travel@Hanbit.example [1].",  # case
        "Claims are submitted in the Spend section at https://people.hanbit.example/ [2].",
        "Upload the itemised receipt for every expense above 20000 KRW [2].",  # separator
        "The 2026 pay dates are listed from March 25 [2].",  # a date part the source states
        "Claims are submitted in the Spend section at People.Hanbit.example [2].",
    ],
)
def test_quoted_facts_pass_after_normalisation(answer: str) -> None:
    verdict = only(check(answer))
    assert verdict.supported, verdict.reason


def test_fact_from_an_uncited_source_fails_under_cited_and_passes_under_retrieved() -> None:
    answer = "You can reach the Travel Desk at extension 3350 [2]."
    cited = only(check(answer))
    assert not cited.supported and cited.unsupported_facts == ("3350",)
    retrieved = only(check(answer, rule="retrieved"))
    assert retrieved.supported


def test_unmarked_sentences_use_the_answers_citations() -> None:
    answer = "The Travel Desk books flights and hotels. Reach it at extension 3350 [1]."
    result = check(answer)
    assert [s.supported for s in result.sentences] == [True, True]
    assert [s.cites for s in result.sentences] == [(), (1,)]
    assert result.supported == 2 and result.total == 2


def test_bad_marker_is_reported() -> None:
    answer = "The Travel Desk books flights [1]. Rail tickets are booked too [7]."
    result = check(answer)
    assert result.bad_markers == (7,)
    second = result.sentences[1]
    assert second.cites == (7,)
    assert "unknown citation [7]" in second.reason


def test_marker_after_the_period_belongs_to_the_sentence() -> None:
    answer = "You can reach the Travel Desk at extension 3350. [1] Submit it 14 days ahead. [1]"
    result = check(answer)
    spans = [answer[s.start : s.end] for s in result.sentences]
    assert spans == [
        "You can reach the Travel Desk at extension 3350. [1]",
        "Submit it 14 days ahead. [1]",
    ]
    assert all(s.supported and s.cites == (1,) for s in result.sentences)


def test_content_no_source_supports_is_unsupported() -> None:
    verdict = only(check("Elephants may fly over the green parliament [1]."))
    assert not verdict.supported and verdict.claim
    assert verdict.reason.startswith("no source supports it")


def test_trivial_sentences_are_not_claims() -> None:
    answer = "You can reach the Travel Desk at extension 3350 [1]. I hope this helps! Let me know."
    result = check(answer)
    assert [(s.claim, s.supported, s.reason) for s in result.sentences] == [
        (True, True, "ok"),
        (False, True, "no claim"),
        (False, True, "no claim"),
    ]
    assert (result.supported, result.total) == (1, 1)


def test_korean_facts() -> None:
    sources = {1: LEAVE_KO}
    good = verify_answer("유급 병가는 연 10일입니다 [1].", sources, [LEAVE_KO], {1})
    assert only(good).supported, only(good).reason
    bad = only(verify_answer("유급 병가는 연 12일입니다 [1].", sources, [LEAVE_KO], {1}))
    assert not bad.supported and bad.unsupported_facts == ("12",)
    amount = verify_answer("국내 숙박 출장 일비는 하루 5만원입니다 [1].", sources, [LEAVE_KO], {1})
    assert only(amount).supported, only(amount).reason
    ext = only(verify_answer("헬프데스크는 내선 4358입니다 [1].", sources, [LEAVE_KO], {1}))
    assert ext.unsupported_facts == ("4358",)
    polite = verify_answer("도움이 되셨기를 바랍니다.", sources, [LEAVE_KO], {1})
    assert only(polite).claim is False and polite.total == 0


def test_answer_without_citations_is_checked_against_every_retrieved_source() -> None:
    result = check("Reach the Travel Desk at extension 3350. Claims take 31 days.")
    assert [s.supported for s in result.sentences] == [True, False]
    assert result.sentences[1].unsupported_facts == ("31",)


def test_extract_facts() -> None:
    text = (
        "Call ext. 3350 or x4357 [1], write to A.Lee@Hanbit.example, see https://id.hanbit.example."
        " Pay 1,500.00 USD (3.5%) by 2026-03-25 at 22:00; phone +82-2-6000-4357; 병가 10일, 5만원."
    )
    assert extract_facts(text) == [
        "3350",
        "x4357",
        "A.Lee@Hanbit.example",
        "https://id.hanbit.example",
        "1,500.00",
        "3.5",
        "2026-03-25",
        "22:00",
        "+82-2-6000-4357",
        "10",
        "5만",
    ]
    assert extract_facts("Steps: 1. Open Spend. 2. Click New claim.") == []
    keys = [f.key for f in find_facts("1,500.00 USD and 5만원 and 3,350 and 2.50")]
    # an integer written as a decimal keeps its point: only a source that writes it so holds it
    assert keys == ["1500.", "50000", "3350", "2.5"]


def test_source_facts_read_liberally() -> None:
    source = SourceFacts.of("Call ext.3350 or (02) 6000-4357. Due 2026-03-25.")
    for fact in find_facts("3350, 6000-4357, March 25, 2026 and 25 March"):
        assert source.holds(fact), fact
    for fact in find_facts("3351, March 26, 2025-03-25"):
        assert not source.holds(fact), fact
    decimal = SourceFacts.of("The fee is 3.00 USD, or 2.5 per item.")
    assert all(decimal.holds(f) for f in find_facts("3, 3.0, 3.00, 2.50"))
    integer = SourceFacts.of("Laptops are ready within 3 working days.")
    assert integer.holds(find_facts("3")[0]) and not integer.holds(find_facts("3.0")[0])


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="rule must be one of"):
        check("x", rule="anything")
    with pytest.raises(TypeError, match="answer must be str"):
        verify_answer(None, {}, [], set())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cited must map"):
        verify_answer("x", {"1": "a"}, [], set())  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="retrieved must be"):
        verify_answer("x", {}, "not a list", set())
