"""Feedback on someone else's answer reveals nothing about it (issue #22, item 4).

``POST /api/messages/{id}/feedback`` on another user's answer used to answer "conversation
<their conversation id> not found"; now it answers exactly as for an answer that does not
exist.
"""

from __future__ import annotations

import httpx

from appliance.core.db.models import Conversation, Message

PASSWORD = "password-789"


def test_feedback_on_another_users_answer_is_a_plain_404(site) -> None:  # noqa: ANN001
    alice = site.auth.principal_for("alice")
    with site.appliance.db.session() as s:
        for _ in range(3):  # conversation and message ids that differ
            s.add(Conversation(user_id=alice.user_id, title="padding"))
        conv = Conversation(user_id=alice.user_id, title="alice's")
        s.add(conv)
        s.flush()
        answer = Message(conversation_id=conv.id, role="assistant", content="hers")
        s.add(answer)
        s.flush()
        if answer.id == conv.id:  # (the suite's earlier tests decide the ids) one more
            answer = Message(conversation_id=conv.id, role="assistant", content="hers, again")
            s.add(answer)
            s.flush()
        conv_id, message_id = conv.id, answer.id
    assert conv_id != message_id
    login = httpx.post(f"{site.base}/api/login", json={"username": "bob", "password": PASSWORD})
    h = {"authorization": f"Bearer {login.json()['token']}"}
    theirs = httpx.post(
        f"{site.base}/api/messages/{message_id}/feedback", json={"rating": 1}, headers=h
    )
    missing_id = 2**62
    missing = httpx.post(
        f"{site.base}/api/messages/{missing_id}/feedback", json={"rating": 1}, headers=h
    )
    assert theirs.status_code == missing.status_code == 404
    assert theirs.text.replace(str(message_id), "ID") == missing.text.replace(str(missing_id), "ID")
    assert f"conversation {conv_id}" not in theirs.text
