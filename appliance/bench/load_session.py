"""One simulated staff session against a running app, over HTTP: log in, ask a few questions in
one conversation (``/api/chat``, SSE), and record every turn's outcome and timings.

Outcomes (``Turn.outcome``): ``ok`` (a ``done`` event), ``busy`` (HTTP 503 ``busy``, or an
``error`` event of kind ``busy``: a clear "try again"), ``unavailable`` (HTTP 503 or an ``error``
event of kind ``unavailable``: the engine is down, said clearly), and ``unclear`` for anything a
user could not understand (a 500, a broken or hung stream, a transport error).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field

import httpx

CLEAR = ("ok", "busy", "unavailable")
RETRY_WAIT_S = {"busy": 2.0, "unavailable": 5.0}


@dataclass
class Turn:
    session: int
    question: str
    started: float  # monotonic
    ended: float = 0.0
    outcome: str = "unclear"
    detail: str = ""
    ttft_s: float | None = None
    conversation_id: int | None = None
    message_id: int | None = None
    answer: str = ""


@dataclass
class SessionPlan:
    index: int
    username: str
    password: str
    questions: tuple[str, ...]
    deadline: float  # monotonic: no new turn starts after it
    think_s: float = 0.5
    retries: int = 3  # a staff user sends a question again after "busy" or "unavailable"
    turns: list[Turn] = field(default_factory=list)


def _classify_http(response: httpx.Response) -> tuple[str, str]:
    try:
        body = json.loads(response.read() or b"{}")
    except ValueError:
        body = {}
    detail = body.get("detail") if isinstance(body, dict) else None
    kind = detail.get("kind") if isinstance(detail, dict) else None
    message = detail.get("message") if isinstance(detail, dict) else str(detail)
    if response.status_code == 503 and kind in ("busy", "unavailable"):
        return kind, f"HTTP 503 {kind}: {message}"
    return "unclear", f"HTTP {response.status_code}: {str(body)[:200]}"


def ask(client: httpx.Client, token: str, turn: Turn, conversation_id: int | None) -> None:
    """Run one turn, filling in ``turn`` (never raises)."""
    body = {"question": turn.question, "conversation_id": conversation_id}
    headers = {"Authorization": f"Bearer {token}"}
    parts: list[str] = []
    try:
        with client.stream("POST", "/api/chat", json=body, headers=headers) as response:
            if response.status_code != 200:
                turn.outcome, turn.detail = _classify_http(response)
                return
            for line in response.iter_lines():
                if not line.startswith("data: "):
                    continue
                data = line.removeprefix("data: ")
                if data == "[DONE]":
                    break
                event = json.loads(data)
                if event["type"] == "delta":
                    if turn.ttft_s is None:
                        turn.ttft_s = time.monotonic() - turn.started
                    parts.append(event["text"])
                elif event["type"] == "done":
                    turn.outcome = "ok"
                    turn.conversation_id = event["conversation_id"]
                    turn.message_id = event["message_id"]
                elif event["type"] == "error":
                    kind = event.get("kind", "")
                    turn.outcome = kind if kind in ("busy", "unavailable") else "unclear"
                    turn.detail = f"error event {kind}: {event.get('message', '')[:200]}"
            if turn.outcome == "ok" and turn.ttft_s is None:
                turn.ttft_s = time.monotonic() - turn.started  # an empty answer
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        turn.outcome, turn.detail = "unclear", f"{type(exc).__name__}: {exc}"
    finally:
        turn.ended = time.monotonic()
        turn.answer = "".join(parts)


def login(client: httpx.Client, username: str, password: str) -> str:
    response = client.post("/api/login", json={"username": username, "password": password})
    response.raise_for_status()
    return response.json()["token"]


def run_session(base_url: str, plan: SessionPlan, timeout_s: float, stop: threading.Event) -> None:
    """Log in and ask ``plan.questions`` in one conversation; a failed turn does not end it
    (the next question starts a new conversation if none exists yet)."""
    timeout = httpx.Timeout(timeout_s, connect=10.0)
    with httpx.Client(base_url=base_url, timeout=timeout) as client:
        try:
            token = login(client, plan.username, plan.password)
        except httpx.HTTPError as exc:
            now = time.monotonic()
            plan.turns.append(Turn(plan.index, "(login)", now, now, "unclear", f"login: {exc}"))
            return
        conversation_id: int | None = None
        for question in plan.questions:
            retries = plan.retries
            while not stop.is_set() and time.monotonic() < plan.deadline:
                turn = Turn(plan.index, question, time.monotonic())
                plan.turns.append(turn)  # in flight until ``ended`` is set
                ask(client, token, turn, conversation_id)
                if turn.outcome in ("busy", "unavailable") and retries > 0:
                    retries -= 1
                    time.sleep(RETRY_WAIT_S[turn.outcome])
                    continue
                break
            else:
                return
            if turn.conversation_id is not None:
                conversation_id = turn.conversation_id
            time.sleep(plan.think_s)


def lost_messages(base_url: str, plans: list[SessionPlan], timeout_s: float = 60) -> list[str]:
    """Read every conversation back; list each acknowledged turn that is missing or altered."""
    lost: list[str] = []
    with httpx.Client(base_url=base_url, timeout=timeout_s) as client:
        for plan in plans:
            done = [t for t in plan.turns if t.outcome == "ok"]
            if not done:
                continue
            token = login(client, plan.username, plan.password)
            headers = {"Authorization": f"Bearer {token}"}
            by_conversation: dict[int, list[dict]] = {}
            for turn in done:
                cid = turn.conversation_id
                if cid not in by_conversation:
                    response = client.get(f"/api/conversations/{cid}", headers=headers)
                    by_conversation[cid] = (
                        response.json()["messages"] if response.status_code == 200 else []
                    )
                stored = {m.get("id"): m for m in by_conversation[cid]}
                message = stored.get(turn.message_id)
                if message is None:
                    lost.append(f"session {plan.index}: message {turn.message_id} is missing")
                elif message.get("content") != turn.answer:
                    lost.append(f"session {plan.index}: message {turn.message_id} differs")
                elif not any(
                    m.get("role") == "user" and m.get("content") == turn.question
                    for m in by_conversation[cid]
                ):
                    lost.append(f"session {plan.index}: the question of {turn.message_id} is lost")
    return lost
