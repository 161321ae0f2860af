"""The HTTP API in-process: rename, delete, regenerate and feedback on one's own
conversations only; API keys; throttled logins answer 429 with Retry-After."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from support.servers import api_login as login

from appliance.api.chat import build_api


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
    limit = appliance.auth.throttle.max_failures
    wrong = {"username": "api-throttled", "password": "wrong-password"}
    codes = [client.post("/api/login", json=wrong).status_code for _ in range(limit)]
    assert codes == [401] * (limit - 1) + [429]  # the failure that locks says so
    right = client.post("/api/login", json={**wrong, "password": "password-789"})
    assert right.status_code == 429 and int(right.headers["retry-after"]) > 0
