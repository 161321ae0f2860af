"""Issue #30, item 2: one staff user could monopolise the browser chat. Gradio's queue had no
size limit and no per-user cap: one cookie queued 50 turns, all accepted, none told "busy",
and another user's browser turn took 275 s instead of 19 s.

Here the engine's line is small (4 generating, 8 waiting) and each user's share is 2 and 2.
One user floods the chat page with 12 questions at once through Gradio's API (their cookie,
as a script in their browser would); a second user asks in a real page, once alone and once
during the flood. The flooder gets their share and a clear "busy" for the rest, at once; the
second user's first text comes about as soon as when alone."""

from __future__ import annotations

import secrets
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from appliance.bench.load_browser import BrowserTurn, ask, open_chat, poll

pytestmark = pytest.mark.browser

PASSWORD = "password-789"
FLOOD = 12
QUESTION = "How often is the office aquarium glass cleaned?"
LONG_ANSWERS = {"max_new_tokens": 64, "min_new_tokens": 48, "stop_repeats": False}


def _respond_endpoint(http: httpx.Client) -> str:
    """The chat page's named endpoint that answers a question (``ChatHandlers.respond``)."""
    names = http.get("/gradio_api/info").json()["named_endpoints"]
    (name,) = [n for n in names if n.strip("/") == "respond"]
    return name


def _flood(base: str, user: str) -> list[str]:
    """``FLOOD`` questions at once from one signed-in user; what each call ended with:
    "answered", "yours" (refused: their share is taken), "full" or what else it said."""
    with httpx.Client(base_url=base, timeout=300) as http:
        http.post("/login", data={"username": user, "password": PASSWORD})
        endpoint = _respond_endpoint(http)

        def one(i: int) -> str:
            data = [f"{QUESTION} ({i})", None, [], [], "en"]
            event = http.post(f"/gradio_api/call{endpoint}", json={"data": data})
            if event.status_code != 200:
                return f"join {event.status_code}"
            stream = http.get(f"/gradio_api/call{endpoint}/{event.json()['event_id']}").text
            for reason in ("yours", "full"):
                if f"turn-note busy {reason}" in stream:
                    return reason
            return "answered" if "event: complete" in stream else stream[-200:]

        with ThreadPoolExecutor(FLOOD) as pool:
            return list(pool.map(one, range(FLOOD)))


def _ask_in_page(page, question: str) -> BrowserTurn:  # noqa: ANN001
    turn = BrowserTurn(0, question)
    ask(page, turn)
    while not poll(page, turn, 300):
        time.sleep(0.25)
    assert turn.outcome == "answered", (turn.outcome, turn.detail)
    return turn


def test_one_user_cannot_fill_the_chat_for_another(own_site, browser) -> None:  # noqa: ANN001
    sections = {
        "engine": {"max_running_requests": 4, "max_queue": 8},
        "chat": {"user_running_turns": 2, "user_waiting_turns": 2},
    }
    with own_site(**sections) as site:
        site.appliance.settings.update("test", {**LONG_ANSWERS, "answer_mode": "generative"})
        flooder, other = (f"flood-{secrets.token_hex(3)}-{i}" for i in range(2))
        for name in (flooder, other):
            site.auth.create_user(name, PASSWORD, role="staff")
        page = open_chat(browser, site.base, other, PASSWORD)
        try:
            alone = _ask_in_page(page, QUESTION)
            with ThreadPoolExecutor(1) as pool:
                flooding = pool.submit(_flood, site.base, flooder)
                time.sleep(3)  # the flood has joined: the flooder's share runs and waits
                during = _ask_in_page(page, "Who feeds the office aquarium fish?")
                outcomes = flooding.result(timeout=600)
        finally:
            page.context.close()
    alone_s, during_s = alone.first - alone.sent, during.first - during.sent
    print(f"first text alone {alone_s:.2f} s, during the flood {during_s:.2f} s; {outcomes}")
    # the flooder got their share (2 running, 2 waiting) and was told "busy" for the rest
    assert sorted(outcomes).count("answered") == 4, outcomes
    assert outcomes.count("yours") == FLOOD - 4, outcomes
    # the other user was not put behind the flood: their first text came about as fast
    assert during_s <= max(3 * alone_s, alone_s + 8), (alone_s, during_s)
