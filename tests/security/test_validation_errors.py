"""Validation errors: OpenAI's shape on ``/v1``, and never the input echoed (issue #22, item 4).

FastAPI's default 422 repeats each bad value (``input``), so a 5 MB body came back whole, and
``/v1`` answered in FastAPI's shape, which OpenAI's clients cannot parse. Now ``/v1`` answers
400 ``{"error": {"message", "type": "invalid_request_error", "param", "code"}}`` and every 422
lists where and what, without the input.
"""

from __future__ import annotations

import httpx

PASSWORD = "password-789"


def test_validation_errors_are_short_and_v1_speaks_openai(own_site) -> None:  # noqa: ANN001
    # a body limit above the 5 MB body, so that it reaches validation
    with own_site(security={"max_body_kb": 8192}) as s:
        alice = s.auth.principal_for("alice")
        key = {"authorization": f"Bearer {s.auth.api_keys.create(alice, 'shape')[0]}"}
        login = httpx.post(f"{s.base}/api/login", json={"username": "alice", "password": PASSWORD})
        session = {"authorization": f"Bearer {login.json()['token']}"}
        big = "x" * (5 * 1024 * 1024)
        with httpx.Client(base_url=s.base, timeout=120) as http:
            answers = {
                "v1 wrong type": http.post(
                    "/v1/chat/completions", json={"messages": big}, headers=key
                ),
                "v1 missing field": http.post(
                    "/v1/chat/completions", json={"messages": [{"content": big}]}, headers=key
                ),
                "v1 bad JSON": http.post(
                    "/v1/chat/completions",
                    content=b'{"messages": [' + big.encode(),
                    headers={**key, "content-type": "application/json"},
                ),
                "api wrong type": http.post(
                    "/api/chat", json={"question": big, "conversation_id": "x"}, headers=session
                ),
            }
    for what, r in answers.items():
        assert len(r.content) < 4096, (what, len(r.content))
        assert "xxxxxxxxxx" not in r.text and '"input"' not in r.text, what
        if what.startswith("v1"):
            assert r.status_code == 400, (what, r.status_code)
            error = r.json()["error"]
            assert set(error) == {"message", "type", "param", "code"}, what
            assert error["type"] == "invalid_request_error" and error["message"], what
        else:
            assert r.status_code == 422, (what, r.status_code)
            detail = r.json()["detail"]
            assert detail and all(set(d) <= {"type", "loc", "msg"} for d in detail), detail
    assert answers["v1 missing field"].json()["error"]["param"] == "messages.0.role"
