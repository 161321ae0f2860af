"""Probes of what documents put in front of a reader: markup planted in a document (is it
markup in the chat's evidence card?) and a collection revoked mid-conversation (does the next
turn still cite it?). Each uploads its document to a collection of its own, made for the run,
and deletes it at the end."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from appliance.bench.probes.target import Outcome, Target

CARD_TITLE = "From the documents"  # the card's heading in English (``ui.i18n``: card.title)
# markup in a card's Markdown that the chat would render: a link or image that is not the
# card's own ``[n]``, an HTML tag, a bare or ``www.`` autolink (none of it behind a backslash)
MARKUP = re.compile(r"(?<!\\)(?:!\[|\]\((?!#evidence-)|<[A-Za-z/!]|://|www\.)")
TURN_S = 600.0  # one answer on a busy machine, at most


@contextmanager
def _collection(t: Target, suffix: str, name: str, text: str) -> Iterator[str]:
    """A collection of the run's own holding one document (``name``: ``text``); its documents
    are deleted on the way out."""
    collection = f"probe{t.run_id}{suffix}"
    headers = t.bearer()
    with t.client() as http:
        r = http.post(
            "/api/admin/documents",
            files=[("files", (name, text.encode()))],
            data={"collection": collection},
            headers=headers,
        )
        r.raise_for_status()
    try:
        yield collection
    finally:
        with t.client() as http:
            listed = http.get(f"/api/admin/documents?collection={collection}", headers=headers)
            for d in listed.json() if listed.status_code == 200 else []:
                http.delete(f"/api/admin/documents/{d['id']}", headers=headers)


def _grant(t: Target, user: str, collections: list[str]) -> None:
    with t.client() as http:
        r = http.patch(
            f"/api/admin/users/{user}", json={"collections": collections}, headers=t.bearer()
        )
    r.raise_for_status()


def _turn(t: Target, user: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """A non-streamed turn as ``user``: its retrieval and done events by type."""
    with httpx.Client(base_url=t.base, timeout=TURN_S) as http:
        r = http.post(path, json={**body, "stream": False}, headers=t.bearer(user))
    r.raise_for_status()
    return {e["type"]: e for e in r.json().get("events", [])}


def _bubble(t: Target, user: str, question: str) -> str:
    """The chat bubble the chat page sends ``user`` for ``question`` (its Markdown, as the
    page's ``respond`` completes): the one that holds the evidence card, or ""."""
    with t.signed_in_browser(user) as http:
        names = http.get("/gradio_api/info").json().get("named_endpoints", {})
        endpoint = next((n for n in names if n.strip("/") == "respond"), "/respond")
        r = http.post(f"/gradio_api/call{endpoint}", json={"data": [question, None, [], [], "en"]})
        r.raise_for_status()
        stream = http.get(f"/gradio_api/call{endpoint}/{r.json()['event_id']}", timeout=TURN_S)
    done = [
        line for line in stream.text.splitlines() if line.startswith("data:") and line[5:].strip()
    ]
    done = [line for line in done if line[5:].strip() != "null"]
    outputs = json.loads(done[-1][5:]) if done else []
    return next((text for text in _strings(outputs) if CARD_TITLE in text), "")


def _strings(value: Any) -> Iterator[str]:  # noqa: ANN401 - any JSON
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def card_markup(t: Target) -> Outcome:
    """A document's sentence holds a Markdown link, an image, an HTML image with a handler and
    autolinks; the card quotes it. Is any of it markup in the card the chat page shows (or an
    off-box link in the ``/api/chat`` evidence's rendering)?"""
    planted = (
        f"Probe {t.run_id} toner is ordered through the [supplies portal](http://evil.example/t) "
        "![beacon](http://evil.example/b.png) <img src=x onerror=alert(1)> "
        "**only** on Fridays <https://evil.example/a> https://evil.example/b"
    )
    question = f"How is probe {t.run_id} toner ordered?"
    user = t.staff("markup")
    with _collection(t, "m", f"toner-{t.run_id}.md", f"# Toner\n\n{planted}.\n") as collection:
        _grant(t, user, ["default", collection])
        evidence = _turn(t, user, "/api/chat", {"question": question})["retrieval"]["evidence"]
        if not any("evil.example" in s["text"] for s in evidence):
            return Outcome("the card did not quote the planted sentence", False)
        card = _bubble(t, user, question).partition("\n\n")[0]
    if not card:
        return Outcome("no card in the chat page's answer", False)
    found = MARKUP.findall(card)
    got = f"{len(found)} markup in the card" + (f": {' '.join(found)}" if found else "")
    return Outcome(got[:90], not found)


def revoked_collection(t: Target) -> Outcome:
    """A staff user asks a question a collection of theirs answers; the admin revokes it;
    the follow-up and the regenerate cite none of it, and the stored conversation shows none
    of its text (``GET /api/conversations/{id}``)."""
    code = f"PROBE-{t.run_id}-CODE"
    secret = f"# Approval\n\nThe probe {t.run_id} approval code is {code}.\n"
    user = t.staff("revoked")
    with _collection(t, "r", f"approval-{t.run_id}.md", secret) as collection:
        _grant(t, user, ["default", collection])
        asked = _turn(t, user, "/api/chat", {"question": f"What is the probe {t.run_id} code?"})
        if not any(code in c["text"] for c in asked["retrieval"]["citations"]):
            return Outcome("the first answer did not cite the collection", False)
        conversation = asked["done"]["conversation_id"]
        _grant(t, user, ["default"])
        follow = _turn(
            t,
            user,
            "/api/chat",
            {"question": "And who approves it?", "conversation_id": conversation},
        )
        again = _turn(t, user, f"/api/conversations/{conversation}/regenerate", {})
        with t.client() as http:
            stored = http.get(f"/api/conversations/{conversation}", headers=t.bearer(user))
    cited = [c for turn in (follow, again) for c in turn["retrieval"]["citations"]]
    shown = [
        item
        for m in stored.json()["messages"]
        for item in (*m.get("citations", []), *m.get("evidence", []))
    ]
    turns = sum(code in c["text"] for c in cited)
    history = sum(code in item.get("text", "") for item in shown)
    return Outcome(
        f"restricted text in {turns} new citation(s), {history} in the history",
        turns == 0 and history == 0,
    )
