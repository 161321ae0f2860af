"""The question's language (``rag.language``) and the prompt line that asks for an answer in
it (issue #32, item 3: a Korean question was answered in English, or in broken Korean)."""

from __future__ import annotations

import pytest

from rag.language import reply_instruction, script_language
from rag.prompt import Citation, render_user_turn


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("연차 휴가는 며칠인가요?", "ko"),
        ("VPN 비밀번호는 어떻게 재설정하나요?", "ko"),  # English names in a Korean question
        ("How do I reset my VPN password?", "en"),
        ("What does 연차 mean in the HR handbook policy?", "en"),  # one Korean word
        ("有給休暇は何日ですか", "ja"),
        ("年假有几天", "zh"),
        ("123 ?!", "und"),
        ("", "und"),
    ],
)
def test_the_questions_language_by_its_letters(text: str, language: str) -> None:
    assert script_language(text) == language


def test_a_non_english_question_asks_for_an_answer_in_its_language() -> None:
    cites = [Citation(1, 10, 3, "HR", "Leave", None, "hr.md", "x")]
    english = render_user_turn("How many days of leave?", [], cites)
    korean = render_user_turn("연차 휴가는 며칠인가요?", [], cites)
    assert english == "Most relevant documents: [1]\n\nQuestion: How many days of leave?"
    assert korean == (
        "Most relevant documents: [1]\n\nAnswer in Korean (한국어).\n\n"
        "Question: 연차 휴가는 며칠인가요?"
    )
    assert reply_instruction("en") is None and reply_instruction("und") is None
