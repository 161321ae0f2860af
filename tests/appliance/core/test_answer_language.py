"""Issue #32, item 3: the answer comes in the question's language. A model declares the
languages it writes (``engine.model_languages``; the bundled SmolLM2-135M: English only).
Asked in Korean, such a model wrote "연차 휴가는 며칠인 것이 아니하다." (and the panel said
"verified"); now the turn shows the documents' sentences and says, in Korean, that the model
does not write Korean, with no generation. A model that writes Korean is asked to answer in
it. Real services over the sample handbook, the real embedded engine."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from appliance.core.config import EngineConfig
from appliance.core.db.models import Message
from appliance.core.services.chat import ChatService, DoneEvent, RetrievalEvent
from appliance.core.services.grounding import CANNOT_WRITE

KOREAN = "연차 휴가는 최대 며칠까지 받을 수 있나요?"  # the handbook says: 최대 25일


def _chat(appliance, languages: frozenset[str] | None) -> ChatService:  # noqa: ANN001
    a = appliance
    return ChatService(
        a.db, a.knowledge, a.engine, a.config.chat, a.settings, a.ordering,
        model_languages=languages,
    )  # fmt: skip


@pytest.fixture(scope="module")
def staff(appliance):  # noqa: ANN001, ANN201
    return appliance.auth.create_user("staff-language", "password-123", role="staff")


def _turn(chat: ChatService, staff, question: str) -> tuple[RetrievalEvent, DoneEvent]:  # noqa: ANN001
    events = list(chat.ask(staff, question))
    retrieval = next(e for e in events if isinstance(e, RetrievalEvent))
    return retrieval, events[-1]


def _sent(appliance, done: DoneEvent) -> str:  # noqa: ANN001
    """The last user message as the engine was sent it."""
    with appliance.db.session() as s:
        question = s.scalars(
            select(Message).where(Message.id < done.message_id).order_by(Message.id.desc())
        ).first()
        return question.prompt_text or ""


@pytest.mark.parametrize("mode", ["grounded", "generative"])
def test_an_english_only_model_shows_the_documents_and_says_so_in_korean(
    appliance,  # noqa: ANN001
    staff,  # noqa: ANN001
    mode: str,
) -> None:
    before = appliance.settings.current().answer_mode
    appliance.settings.update("test", {"answer_mode": mode})
    try:
        retrieval, done = _turn(_chat(appliance, frozenset({"en"})), staff, KOREAN)
    finally:
        appliance.settings.update("test", {"answer_mode": before})
    assert isinstance(done, DoneEvent)
    assert done.stats.prompt_tokens == 0 and done.stats.completion_tokens == 0  # no generation
    assert done.answer == CANNOT_WRITE["ko"]
    # the documents' own sentences lead, in both modes, and the fact is among them
    assert retrieval.mode == "grounded" and retrieval.evidence
    assert any("25일" in s.text for s in retrieval.evidence)
    assert done.check.total == 0  # the notice is ours: nothing in it is "verified"


def test_english_questions_are_answered_as_before(appliance, staff) -> None:  # noqa: ANN001
    _, done = _turn(_chat(appliance, frozenset({"en"})), staff, "How many days of annual leave?")
    assert done.stats.prompt_tokens > 0 and done.answer.strip()
    assert "Answer in" not in _sent(appliance, done)


def test_a_model_that_writes_korean_is_asked_to_answer_in_korean(appliance, staff) -> None:  # noqa: ANN001
    _, done = _turn(_chat(appliance, frozenset({"en", "ko"})), staff, KOREAN)
    assert done.stats.prompt_tokens > 0  # generated
    assert "Answer in Korean (한국어)." in _sent(appliance, done)
    assert done.answer != CANNOT_WRITE["ko"]


def test_which_languages_a_model_writes() -> None:
    assert EngineConfig().written_languages() == frozenset({"en"})  # the bundled SmolLM2
    assert EngineConfig(model_path="/models/qwen").written_languages() is None  # any: undeclared
    declared = EngineConfig(model_path="/models/x", model_languages=("en", "ko"))
    assert declared.written_languages() == frozenset({"en", "ko"})
