"""What a follow-up is retrieved with (rag.followup, pure; the real BM25 tokenizer)."""

from __future__ import annotations

import pytest

from rag.bm25_tokenizer import Tokenizer
from rag.followup import retrieval_query

TOKENIZE = Tokenizer().tokenize
LEAVE = "How many days of annual leave do full-time employees get?"


@pytest.mark.parametrize(
    ("follow_up", "reason"),
    [
        ("And sick leave?", "reference"),
        ("What hours is it staffed?", "reference"),
        ("Do they get an internet allowance?", "reference"),
        ("What about contractors?", "reference"),
        ("Sick leave?", "short"),
        ("How do I reset my VPN password?", "self-contained"),
        ("Is it possible to work from home three days a week?", "self-contained"),
        ("그럼 재발급 비용은요?", "reference"),
        ("재발급 비용은요?", "short"),
        ("경비 청구는 언제까지 해야 하나요?", "self-contained"),
    ],
)
def test_a_follow_up_carries_the_last_question_only_when_it_leans_on_it(follow_up, reason) -> None:  # noqa: ANN001
    query = retrieval_query(follow_up, [LEAVE], TOKENIZE)
    assert query.reason == reason
    assert (LEAVE in query.text) == query.carried
    assert query.text.startswith(follow_up)


def test_a_first_question_and_a_chain_of_short_follow_ups() -> None:
    assert retrieval_query(LEAVE, [], TOKENIZE).reason == "first"
    # the chain keeps its topic: two questions back at most
    chain = [LEAVE, "And sick leave?"]
    text = retrieval_query("How do I request it?", chain, TOKENIZE).text
    assert "sick" in text and "annual" in text
    longer = ["What is tailgating?", LEAVE, "And sick leave?"]
    assert "tailgating" not in retrieval_query("And for part-timers?", longer, TOKENIZE).text
