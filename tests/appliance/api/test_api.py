"""The HTTP API in-process (real services, real engine): auth, streaming turns, ownership."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from fastapi.testclient import TestClient
from support.servers import api_login as login

from appliance.api.chat import build_api

# one stored message in GET /api/conversations/{id}, keys in this order
MESSAGE_FIELDS = [
    "id",
    "role",
    "content",
    "citations",
    "finish_reason",
    "prompt_tokens",
    "cached_tokens",
    "completion_tokens",
    "ttft_ms",
    "e2e_ms",
    "retrieval_ms",
    "evidence",
    "verification",
    "answer_mode",
]


@pytest.fixture(scope="module")
def client(appliance):  # noqa: ANN001, ANN201
    return TestClient(build_api(appliance.auth, appliance.chat, appliance.engine))


def sse_events(response) -> list[dict]:  # noqa: ANN001
    lines = [ln for ln in response.iter_lines() if ln.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    return [json.loads(ln[6:]) for ln in lines[:-1]]


def test_requests_without_a_valid_token_are_refused(client: TestClient) -> None:
    assert client.get("/api/conversations").status_code == 401
    bad = {"authorization": "Bearer not-a-token"}
    assert client.get("/api/conversations", headers=bad).status_code == 401
    wrong = client.post("/api/login", json={"username": "admin", "password": "nope-nope"})
    assert wrong.status_code == 401


def test_health(client: TestClient) -> None:
    assert client.get("/health").json() == {"status": "ok", "engine": True}


def test_streamed_turn_over_http(client: TestClient, appliance) -> None:  # noqa: ANN001
    headers = login(client, appliance, "api-user")
    body = {"question": "How do I reset my VPN password?"}
    with client.stream("POST", "/api/chat", json=body, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = sse_events(response)
    assert events[0]["type"] == "retrieval"
    assert events[0]["citations"][0]["source"] == "it-vpn-access.md"
    # the evidence card (grounded, the default) comes with the sources, before any text
    assert events[0]["mode"] == "grounded" and events[0]["evidence"]
    card = events[0]["evidence"][0]
    chunk = next(c for c in events[0]["citations"] if c["number"] == card["number"])
    assert chunk["text"][card["start"] : card["end"]] == card["text"]
    assert events[1]["type"] == "delta"
    done = events[-1]
    assert done["type"] == "done" and done["stats"]["prompt_tokens"] > 0
    verification = done["verification"]
    assert set(verification) == {"supported", "total", "sentences", "bad_markers"}
    assert verification["supported"] <= verification["total"]
    conv = done["conversation_id"]
    listed = client.get("/api/conversations", headers=headers).json()
    assert conv in [c["id"] for c in listed]
    entry = next(c for c in listed if c["id"] == conv)
    assert list(entry) == ["id", "title", "updated_at"] and entry["title"] == body["question"]
    assert datetime.fromisoformat(entry["updated_at"])
    read = client.get(f"/api/conversations/{conv}", headers=headers).json()
    assert list(read) == ["id", "messages"] and read["id"] == conv
    stored = read["messages"]
    assert stored[1]["content"] == "".join(e["text"] for e in events if e["type"] == "delta")
    assert [list(m) for m in stored] == [MESSAGE_FIELDS] * 2
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[0]["citations"] == [] and stored[0]["prompt_tokens"] is None
    assert stored[1]["id"] == done["message_id"]
    assert stored[1]["citations"] == events[0]["citations"]
    assert stored[1]["prompt_tokens"] == done["stats"]["prompt_tokens"]
    assert stored[1]["evidence"][0]["text"] == card["text"]
    assert stored[1]["verification"]["total"] == verification["total"]
    assert stored[1]["answer_mode"] == "grounded"

    other = login(client, appliance, "api-other")
    assert client.get(f"/api/conversations/{conv}", headers=other).status_code == 404
    assert conv not in [c["id"] for c in client.get("/api/conversations", headers=other).json()]
    follow = {"question": "And then?", "conversation_id": conv}
    assert client.post("/api/chat", json=follow, headers=other).status_code == 404


def test_bad_input_gets_a_clear_status(client: TestClient, appliance) -> None:  # noqa: ANN001
    headers = login(client, appliance, "api-user")
    empty = client.post("/api/chat", json={"question": "  "}, headers=headers)
    assert empty.status_code == 400 and empty.json()["detail"]["kind"] == "empty"
    huge = client.post("/api/chat", json={"question": "x" * 10_000}, headers=headers)
    assert huge.status_code == 413 and "limit" in huge.json()["detail"]["message"]


def test_client_leaving_mid_answer_cancels_generation(appliance) -> None:  # noqa: ANN001
    """Over a real socket: the reader hangs up after the first token; the engine aborts."""
    import time

    import httpx
    from support.servers import serving

    app = build_api(appliance.auth, appliance.chat, appliance.engine)
    with serving(app) as base:
        if appliance.auth.principal_for("api-leaver") is None:
            appliance.auth.create_user("api-leaver", "password-789")
        token = httpx.post(
            f"{base}/api/login",
            json={"username": "api-leaver", "password": "password-789"},
            timeout=60,
        ).json()["token"]
        aborted = appliance.engine.metrics()["num_aborted_requests_total"]
        body = {"question": "Describe every step of the onboarding week in detail."}
        headers = {"authorization": f"Bearer {token}"}
        # a cold prompt on two busy cores can take many seconds before its first token
        with httpx.stream(
            "POST", f"{base}/api/chat", json=body, headers=headers, timeout=180
        ) as response:
            for line in response.iter_lines():
                if '"type": "delta"' in line:
                    break  # leave after the first streamed token
        deadline = time.time() + 30
        while appliance.engine.metrics()["num_aborted_requests_total"] == aborted:
            assert time.time() < deadline, "generation went on after the client left"
            time.sleep(0.1)
        listed = httpx.get(f"{base}/api/conversations", headers=headers, timeout=60).json()
        assert listed == []  # an abandoned turn is not stored half-written
