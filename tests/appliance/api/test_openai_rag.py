"""The OpenAI-compatible RAG endpoint, driven by the official ``openai`` client over a real
socket: per-user API keys, streaming and not, citations and usage in the response."""

from __future__ import annotations

import openai
import pytest
from support.servers import serving

from appliance.api.chat import build_api
from appliance.core.services.conversations import ConversationService


@pytest.fixture(scope="module")
def base(appliance):  # noqa: ANN001, ANN201
    with serving(build_api(appliance.auth, appliance.chat, appliance.engine)) as url:
        yield url


def client_for(base: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=180)


@pytest.fixture(scope="module")
def keys(appliance):  # noqa: ANN001, ANN201
    owner = appliance.auth.create_user("oai-owner", "password-123")
    other = appliance.auth.create_user("oai-other", "password-123")
    return appliance.auth.api_keys.create(owner, "tool")[0], appliance.auth.api_keys.create(
        other, "tool"
    )[0]


def test_completion_with_citations_and_cached_usage(base: str, keys, appliance) -> None:  # noqa: ANN001
    mine, theirs = keys
    with client_for(base, mine) as oai:
        reply = oai.chat.completions.create(
            model="rag-appliance",
            messages=[{"role": "user", "content": "How do I reset my VPN password?"}],
        )
        assert reply.choices[0].message.content
        assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
        extra = reply.model_extra
        assert extra["citations"][0]["source"] == "it-vpn-access.md"
        assert extra["evidence"] and {"number", "start", "end", "text"} <= set(extra["evidence"][0])
        assert extra["verification"]["supported"] <= extra["verification"]["total"]
        conv = extra["conversation_id"]

        # streamed follow-up in the same conversation: the first turn is in the engine's cache
        chunks = list(
            oai.chat.completions.create(
                model="rag-appliance",
                messages=[{"role": "user", "content": "How long must the password be?"}],
                stream=True,
                extra_body={"conversation_id": conv},
            )
        )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text and sum(bool(c.choices and c.choices[0].delta.content) for c in chunks) >= 2
    assert chunks[0].model_extra["citations"]
    assert "evidence" in chunks[0].model_extra  # the card rides on the first chunk
    assert chunks[-1].model_extra["verification"] is not None
    last = chunks[-1]
    assert last.choices[0].finish_reason in ("stop", "length")
    assert last.model_extra["conversation_id"] == conv
    assert last.usage.prompt_tokens_details.cached_tokens > 0
    owner = appliance.auth.principal_for("oai-owner")
    assert len(ConversationService(appliance.db, appliance.chat).messages(owner, conv)) == 4

    # another user's key cannot continue (or even see) this conversation
    with client_for(base, theirs) as oai, pytest.raises(openai.NotFoundError):
        oai.chat.completions.create(
            model="rag-appliance",
            messages=[{"role": "user", "content": "What did they ask?"}],
            extra_body={"conversation_id": conv},
        )


def test_keys_are_checked(base: str, keys, appliance) -> None:  # noqa: ANN001
    with client_for(base, "sk-not-a-real-key") as oai, pytest.raises(openai.AuthenticationError):
        oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    owner = appliance.auth.principal_for("oai-owner")
    key, info = appliance.auth.api_keys.create(owner, "short-lived")
    appliance.auth.api_keys.revoke(owner, info.id)
    with client_for(base, key) as oai, pytest.raises(openai.AuthenticationError):
        oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    with client_for(base, keys[0]) as oai:
        assert [m.id for m in oai.models.list().data] == ["rag-appliance"]
        with pytest.raises(openai.BadRequestError):
            oai.chat.completions.create(model="m", messages=[{"role": "system", "content": "x"}])


def test_a_client_that_resends_the_chat_continues_its_conversation(
    base: str,
    keys,  # noqa: ANN001
    appending,  # noqa: ANN001
) -> None:
    """The usual OpenAI client pattern: no conversation id, the whole chat on every call."""
    # appending: under the default adaptive layout the follow-up may be re-laid by design,
    # depending on what earlier tests left in the shared engine's cache
    mine, theirs = keys
    first_q = "Who approves travel expenses?"
    with client_for(base, mine) as oai:
        first = oai.chat.completions.create(
            model="rag-appliance", messages=[{"role": "user", "content": first_q}]
        )
        conv = first.model_extra["conversation_id"]
        assert first.model_extra["history"] == "new"
        chat = [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": first_q},
            {"role": "assistant", "content": first.choices[0].message.content},
            {"role": "user", "content": "And by when must receipts be filed?"},
        ]
        second = oai.chat.completions.create(model="rag-appliance", messages=chat)
        assert second.model_extra["conversation_id"] == conv
        assert second.model_extra["history"] == "continued"
        # the stored first turn (with its documents) is replayed: the engine has it cached
        assert second.usage.prompt_tokens_details.cached_tokens > first.usage.prompt_tokens // 2

        edited = [*chat[:2], {"role": "assistant", "content": "Something else."}, chat[3]]
        third = oai.chat.completions.create(model="rag-appliance", messages=edited)
        assert third.model_extra["history"] == "unmatched"
        assert third.model_extra["conversation_id"] not in (conv, None)
    # the same chat sent with another user's key never reaches this user's conversation
    with client_for(base, theirs) as oai:
        other = oai.chat.completions.create(model="rag-appliance", messages=chat)
    assert other.model_extra["history"] == "unmatched"
    assert other.model_extra["conversation_id"] != conv
