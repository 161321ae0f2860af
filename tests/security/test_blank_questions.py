"""A question of only invisible characters is refused as empty (issue #22, item 4).

NUL, zero-width characters (U+200B, U+200C, U+200D, U+FEFF, U+2060) and other format or
control characters used to pass the empty check (``str.strip`` keeps them) and start a turn.
The check is the core's, so the chat page (``ChatService.ask``), ``/api`` and ``/v1`` all refuse.
"""

from __future__ import annotations

import httpx
import pytest

from appliance.core.errors import ChatError

PASSWORD = "password-789"
BLANK = ["\x00", "\u200b", "\u200c\u200d", "\ufeff\u2060", " \x00\u200b\n\t\u2060 ", "\u202e\x07"]


def test_invisible_questions_are_refused_as_empty(site) -> None:  # noqa: ANN001
    alice = site.auth.principal_for("alice")
    for question in BLANK:
        with pytest.raises(ChatError) as err:
            site.appliance.chat.ask(alice, question)
        assert err.value.kind == "empty", repr(question)
    login = httpx.post(f"{site.base}/api/login", json={"username": "alice", "password": PASSWORD})
    session = {"authorization": f"Bearer {login.json()['token']}"}
    key = {"authorization": f"Bearer {site.auth.api_keys.create(alice, 'blank')[0]}"}
    with httpx.Client(base_url=site.base, timeout=120) as http:
        for question in BLANK:
            r = http.post(
                "/api/chat", json={"question": question, "stream": False}, headers=session
            )
            assert r.status_code == 400 and r.json()["detail"]["kind"] == "empty", repr(question)
            body = {"messages": [{"role": "user", "content": question}]}
            r = http.post("/v1/chat/completions", json=body, headers=key)
            assert r.status_code == 400, (repr(question), r.text)
