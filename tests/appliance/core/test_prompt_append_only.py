"""Prompt hygiene through the real chat service and the real engine's tokenizer: a conversation
only appends (each turn's token ids start with the previous turn's), and nothing
request-specific comes before the documents (two users asking the same thing send the same
prompt)."""

from __future__ import annotations

import pytest

from appliance.core.services.chat import ChatService, DoneEvent


class RecordingEngine:
    """The real engine, passing every request through and keeping it for inspection."""

    def __init__(self, engine) -> None:  # noqa: ANN001
        self._engine = engine
        self.requests: list = []

    def generate(self, request):  # noqa: ANN001, ANN201
        self.requests.append(request)
        return self._engine.generate(request)

    def __getattr__(self, name: str):  # noqa: ANN204
        return getattr(self._engine, name)


@pytest.fixture(scope="module")
def spied(appliance, engine):  # noqa: ANN001, ANN201
    spy = RecordingEngine(engine)
    chat = ChatService(
        appliance.db,
        appliance.knowledge,
        spy,
        appliance.config.chat,
        appliance.settings,
        appliance.ordering,
    )
    return spy, chat


def turn(chat: ChatService, user, question: str, conv: int | None = None) -> DoneEvent:  # noqa: ANN001
    done = list(chat.ask(user, question, conv))[-1]
    assert isinstance(done, DoneEvent), done
    return done


def test_each_turn_extends_the_previous_one_token_for_token(
    appliance, engine, spied, appending
) -> None:  # noqa: ANN001
    spy, chat = spied
    user = appliance.auth.create_user("staff-append", "password-123", role="staff")
    assert appliance.settings.current().ordering == "prefix"  # the default strategy
    start = len(spy.requests)
    questions = [
        "How do I reset my VPN password?",
        "What is the IT helpdesk phone extension?",
        "How many days of annual leave do I get?",
    ]
    conv, dones = None, []
    for q in questions:
        dones.append(turn(chat, user, q, conv))
        conv = dones[-1].conversation_id
    requests = spy.requests[start:]
    ids = [engine.encode(engine.render_chat(r.messages)) for r in requests]
    for earlier, later, done in zip(ids, ids[1:], dones[1:], strict=False):
        assert later[: len(earlier)] == earlier  # earlier text stays byte- and token-identical
        assert done.stats.prompt_tokens == len(later)
        assert done.stats.cached_tokens >= len(earlier) - 1  # the engine reused all of it
    # a later turn renders only chunks not already in the conversation
    rendered = [
        [c for c in r.messages[-1][1].split("\n\n") if c[:1] == "[" and "]" in c[:4]]
        for r in requests
    ]
    headers = [h.split("\n")[0] for turn_chunks in rendered for h in turn_chunks]
    assert len(headers) == len(set(headers)) > 0


def test_nothing_request_specific_precedes_the_documents(appliance, engine, spied) -> None:  # noqa: ANN001
    spy, chat = spied
    question = "Where should I send a suspicious phishing email?"
    a = appliance.auth.create_user("staff-hygiene-a", "password-123", role="staff")
    b = appliance.auth.create_user("staff-hygiene-b", "password-123", role="staff")
    start = len(spy.requests)
    turn(chat, a, question)
    second = turn(chat, b, question)
    first_req, second_req = spy.requests[start:]
    # no user name, date or score anywhere: the same question gives the same prompt
    assert first_req.messages == second_req.messages
    text = engine.render_chat(first_req.messages)
    head = text[: text.index("Documents:")]
    assert "staff-hygiene" not in text and appliance.config.chat.system_prompt in head
    assert second.stats.cached_tokens >= second.stats.prompt_tokens - 1
