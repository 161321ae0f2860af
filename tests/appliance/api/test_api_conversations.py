"""The HTTP API in-process: rename, delete, regenerate and feedback on one's own
conversations only; API keys; throttled logins answer 429 with Retry-After."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from support.servers import api_login as login

from appliance.api.chat import build_api
from appliance.core.db.models import Message


@pytest.fixture(scope="module")
def client(appliance):  # noqa: ANN001, ANN201
    return TestClient(build_api(appliance.auth, appliance.chat, appliance.engine))


def test_manage_a_conversation_over_http(client: TestClient, appliance) -> None:  # noqa: ANN001
    mine = login(client, appliance, "api-conv-owner")
    theirs = login(client, appliance, "api-conv-other")
    body = {"question": "How do I reset my VPN password?", "stream": False}
    turn = client.post("/api/chat", json=body, headers=mine).json()
    done = turn["events"][-1]
    conv, message = done["conversation_id"], done["message_id"]

    assert (
        client.patch(f"/api/conversations/{conv}", json={"title": "x"}, headers=theirs).status_code
        == 404
    )
    renamed = client.patch(f"/api/conversations/{conv}", json={"title": "VPN"}, headers=mine)
    assert renamed.json() == {"id": conv, "title": "VPN"}
    assert (
        client.patch(f"/api/conversations/{conv}", json={"title": " "}, headers=mine).status_code
        == 400
    )

    fb = {"rating": -1, "comment": "missing the portal link"}
    assert (
        client.post(f"/api/messages/{message}/feedback", json=fb, headers=theirs).status_code == 404
    )
    assert client.post(f"/api/messages/{message}/feedback", json=fb, headers=mine).json() == {
        "ok": True
    }
    bad = client.post(f"/api/messages/{message}/feedback", json={"rating": 3}, headers=mine)
    assert bad.status_code == 400

    regen = client.post(
        f"/api/conversations/{conv}/regenerate", json={"stream": False}, headers=mine
    )
    assert regen.status_code == 200 and regen.json()["events"][-1]["type"] == "done"
    messages = client.get(f"/api/conversations/{conv}", headers=mine).json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[1]["id"] == regen.json()["events"][-1]["message_id"] != message
    assert client.post(f"/api/conversations/{conv}/regenerate", headers=theirs).status_code == 404
    # "Write an answer" over HTTP: this turn's mode; an unknown mode is refused before any work
    bad_mode = {"stream": False, "answer_mode": "poetry"}
    refused = client.post(f"/api/conversations/{conv}/regenerate", json=bad_mode, headers=mine)
    assert refused.status_code in (400, 422)
    quoted = {"stream": False, "answer_mode": "extractive"}
    extract = client.post(f"/api/conversations/{conv}/regenerate", json=quoted, headers=mine)
    assert extract.json()["events"][0]["mode"] == "extractive"

    assert client.delete(f"/api/conversations/{conv}", headers=theirs).status_code == 404
    assert client.delete(f"/api/conversations/{conv}", headers=mine).json() == {"ok": True}
    assert client.get(f"/api/conversations/{conv}", headers=mine).status_code == 404


def test_api_keys_over_http(client: TestClient, appliance) -> None:  # noqa: ANN001
    mine = login(client, appliance, "api-key-owner")
    theirs = login(client, appliance, "api-key-other")
    created = client.post("/api/keys", json={"name": "script"}, headers=mine).json()
    assert created["key"].startswith("sk-") and created["prefix"] == created["key"][:10]
    listed = client.get("/api/keys", headers=mine).json()
    assert [k["name"] for k in listed] == ["script"] and "key" not in listed[0]
    assert client.get("/api/keys", headers=theirs).json() == []
    assert client.delete(f"/api/keys/{created['id']}", headers=theirs).status_code == 404
    assert client.delete(f"/api/keys/{created['id']}", headers=mine).json() == {"ok": True}
    assert client.get("/api/keys", headers=mine).json()[0]["revoked"] is True


def test_throttled_login_answers_429(client: TestClient, appliance) -> None:  # noqa: ANN001
    appliance.auth.create_user("api-throttled", "password-789")
    limit = appliance.auth.throttle.policy.max_failures
    wrong = {"username": "api-throttled", "password": "wrong-password"}
    codes = [client.post("/api/login", json=wrong).status_code for _ in range(limit + 1)]
    assert codes == [401] * limit + [429]  # checked up to the limit, then refused unchecked
    right = client.post("/api/login", json={**wrong, "password": "password-789"})
    assert right.status_code == 429 and int(right.headers["retry-after"]) > 0


def test_continue_a_cut_answer_over_http(client: TestClient, appliance) -> None:  # noqa: ANN001
    mine = login(client, appliance, "api-continue-owner")
    theirs = login(client, appliance, "api-continue-other")
    before = appliance.settings.current().max_new_tokens
    appliance.settings.update("admin", {"max_new_tokens": 5})
    try:
        body = {"question": "How do I reset my VPN password?", "stream": False}
        done = client.post("/api/chat", json=body, headers=mine).json()["events"][-1]
        assert done["stats"]["finish_reason"] == "length"
        conv, message = done["conversation_id"], done["message_id"]
        [_, cut] = client.get(f"/api/conversations/{conv}", headers=mine).json()["messages"]
        url = f"/api/conversations/{conv}/continue"
        assert client.post(url, json={"stream": False}, headers=theirs).status_code == 404

        # streamed: the same SSE events as a turn, the stored citations first
        with client.stream("POST", url, headers=mine) as response:
            assert response.status_code == 200
            lines = [x for x in response.iter_lines() if x.startswith("data: ")]
        assert lines[-1] == "data: [DONE]"
        events = [json.loads(x.removeprefix("data: ")) for x in lines[:-1]]
        assert [e["type"] for e in events][0] == "retrieval" and events[-1]["type"] == "done"
        assert events[0]["citations"] == cut["citations"]
        added = "".join(e["text"] for e in events if e["type"] == "delta")
        assert added and events[-1]["message_id"] == message
        assert events[-1]["stats"]["cached_tokens"] > 0  # the prompt came from the cache

        # as one JSON object: it grows again, in place
        again = client.post(url, json={"stream": False}, headers=mine).json()
        assert again["events"][-1]["type"] == "done"
        [_, grown] = client.get(f"/api/conversations/{conv}", headers=mine).json()["messages"]
        assert grown["id"] == message
        assert grown["content"] == cut["content"] + added + again["answer"]
    finally:
        appliance.settings.update("admin", {"max_new_tokens": before})
    # an answer that ended on its own has nothing to continue
    with appliance.db.session() as s:
        s.get(Message, message).finish_reason = "stop"
    refused = client.post(url, json={"stream": False}, headers=mine)
    assert refused.status_code == 400 and "not cut" in refused.text
