"""A non-streamed chat stops generating when its client goes (issue #22, item 3).

A ``stream: false`` request on ``/api/chat`` and on ``/v1/chat/completions`` used to run to
the token limit and be stored after the client had disconnected. Here each asks for a long
answer (1024 tokens, the minimum too, on a site of its own), the client drops the connection
once generation is under way, and the engine must go idle within seconds, with nothing stored
for the turn (what a stopped streamed turn stores: nothing).
"""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

import httpx
from sqlalchemy import func, select
from support.servers import wait_idle

from appliance.core.db.models import Conversation, Message

PASSWORD = "password-789"
LONG = 1024


def _start_and_drop(base: str, path: str, token: str, body: dict, engine) -> None:  # noqa: ANN001
    """POST ``body`` on a raw socket, wait until the engine runs it, then hang up."""
    url = urlsplit(base)
    payload = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {url.netloc}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
    ).encode()
    sock = socket.create_connection((url.hostname, url.port))
    try:
        sock.sendall(head + payload)
        deadline = time.monotonic() + 30
        while engine.metrics()["num_running_reqs"] == 0:
            assert time.monotonic() < deadline, "the turn never reached the engine"
            time.sleep(0.02)
        time.sleep(1.0)  # well into the answer, far from its end
        assert engine.metrics()["num_running_reqs"] == 1
    finally:
        sock.close()


def _answers(appliance, username: str) -> int:  # noqa: ANN001
    user_id = appliance.auth.principal_for(username).user_id
    with appliance.db.session() as s:
        return s.scalar(
            select(func.count(Message.id))
            .join(Conversation, Conversation.id == Message.conversation_id)
            .where(Conversation.user_id == user_id, Message.role == "assistant")
        )


def test_non_streamed_turns_are_cancelled_when_the_client_goes(own_site) -> None:  # noqa: ANN001
    with own_site() as s:
        # a long answer, whatever the model would say (``own_site(engine=...)`` cannot be
        # given: the fixture's own ``engine`` argument takes that name)
        s.appliance.settings.update("test", {"max_new_tokens": LONG, "min_new_tokens": LONG})
        engine = s.appliance.engine
        wait_idle(engine)
        login = httpx.post(f"{s.base}/api/login", json={"username": "alice", "password": PASSWORD})
        token = login.json()["token"]
        key = s.auth.api_keys.create(s.auth.principal_for("alice"), "drop")[0]
        question = "How often is the office aquarium glass cleaned?"
        calls = [
            ("/api/chat", token, {"question": question, "stream": False}),
            (
                "/v1/chat/completions",
                key,
                {"messages": [{"role": "user", "content": question}], "stream": False},
            ),
        ]
        for path, secret, body in calls:
            _start_and_drop(s.base, path, secret, body, engine)
            dropped = time.monotonic()
            wait_idle(engine, timeout=5)  # a full answer takes far longer
            assert time.monotonic() - dropped < 5, path
        time.sleep(0.5)  # a turn that finished anyway would be stored by now
        assert _answers(s.appliance, "alice") == 0
