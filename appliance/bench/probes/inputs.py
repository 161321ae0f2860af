"""Probes of malformed input: ids past 64 bits, numbers that are not numbers, text that is not
Unicode or is only invisible characters, hostile file and collection names, a message of
someone else's, ``/v1``'s error shape, and a non-streamed answer whose client has gone."""

from __future__ import annotations

import contextlib
import time

import httpx

from appliance.bench.probes.target import Outcome, Target

HUGE = "99999999999999999999999"
ID_ROUTES = (
    ("GET", f"/api/conversations/{HUGE}", None),
    ("PATCH", f"/api/conversations/{HUGE}", {"title": "x"}),
    ("DELETE", f"/api/conversations/{HUGE}", None),
    ("POST", f"/api/conversations/{HUGE}/regenerate", {"stream": False}),
    ("POST", f"/api/conversations/{HUGE}/continue", {"stream": False}),
    ("POST", f"/api/messages/{HUGE}/feedback", {"rating": 1}),
    ("DELETE", f"/api/keys/{HUGE}", None),
    ("DELETE", f"/api/admin/documents/{HUGE}", None),
    ("POST", f"/api/admin/documents/{HUGE}/reindex", None),
    ("POST", f"/api/admin/documents/{HUGE}/move", {"collection": "x"}),
    ("DELETE", f"/api/admin/api-keys/{HUGE}", None),
    ("POST", "/api/chat", {"question": "hi", "conversation_id": int(HUGE), "stream": False}),
)
NUMBER_QUERIES = (
    "/api/admin/engine/series?minutes=nan",
    "/api/admin/engine/series?minutes=1e308",
    "/api/admin/engine/series?minutes=-inf",
    "/api/admin/chunks?q=x&k=1e308",
    f"/api/admin/chunks?q=x&k={HUGE}",
    "/api/admin/ingestion-runs?limit=-1",
    f"/api/admin/audit?limit={HUGE}",
    "/api/admin/analytics?days=nan",
    f"/api/admin/analytics?days={HUGE}",
)


def _count(results: list[int]) -> str:
    return f"{sum(c >= 500 for c in results)} of {len(results)} got 5xx or no answer"


def huge_ids(t: Target) -> Outcome:
    headers = t.bearer()
    codes = [t.status(m, path, json=body, headers=headers) for m, path, body in ID_ROUTES]
    return Outcome(_count(codes), all(c < 500 for c in codes))


def odd_numbers(t: Target) -> Outcome:
    headers = t.bearer()
    codes = [t.status("GET", path, headers=headers) for path in NUMBER_QUERIES]
    return Outcome(_count(codes), all(c < 500 for c in codes))


def lone_surrogate(t: Target) -> Outcome:
    """``"\\ud800"`` (valid JSON, not Unicode) in a question, and raw invalid UTF-8."""
    headers = {**t.bearer(), "content-type": "application/json"}
    codes = [
        t.status("POST", "/api/chat", content=body, headers=headers)
        for body in (
            b'{"question": "\\ud800", "stream": false}',
            b'{"question": "a\xff\xfeb", "stream": false}',
        )
    ]
    return Outcome(", ".join(map(str, codes)), all(400 <= c < 500 for c in codes))


def invisible_question(t: Target) -> Outcome:
    """A question of NUL and zero-width characters only: refused as empty (400)?"""
    with t.client() as http:
        r = http.post(
            "/api/chat",
            json={"question": "\u0000\u200b\u200d\ufeff", "stream": False},
            headers=t.bearer(),
        )
    return Outcome(str(r.status_code), r.status_code == 400)


def hostile_filenames(t: Target) -> Outcome:
    """Names with a NUL, path parts or 600 characters: stored as given?"""
    names = ["a\x00b.md", "../../etc/evil.md", "C:\\temp\\x.md", "n" * 600 + ".md"]
    files = [
        ("files", (n, f"# Probe {i}\n\nProbe text {i} {t.run_id}.\n".encode()))
        for i, n in enumerate(names)
    ]
    with t.client() as http:
        headers = t.bearer()
        collection = f"probe{t.run_id}"
        r = http.post(
            "/api/admin/documents", files=files, data={"collection": collection}, headers=headers
        )
        listed = http.get(f"/api/admin/documents?collection={collection}", headers=headers)
        stored = [d["name"] for d in listed.json()] if listed.status_code == 200 else []
        for d in listed.json() if listed.status_code == 200 else []:
            http.delete(f"/api/admin/documents/{d['id']}", headers=headers)
    bad = [n for n in stored if "\x00" in n or "/" in n or "\\" in n or len(n) > 255]
    return Outcome(f"{r.status_code}; {len(bad)} of {len(stored)} stored as given", not bad)


def hostile_collections(t: Target) -> Outcome:
    """Collection names with ``/`` or HTML: refused?"""
    with t.client() as http:
        headers = t.bearer()
        files = [("files", ("c.md", f"# C\n\nCollection probe {t.run_id}.\n".encode()))]
        codes = []
        for name in ("../x", "<b>x</b>"):
            r = http.post(
                "/api/admin/documents", files=files, data={"collection": name}, headers=headers
            )
            codes.append(r.status_code)
            if r.status_code == 200:  # accepted: clean up what it made
                for d in http.get("/api/admin/documents", headers=headers).json():
                    if d["collection"] == name:
                        http.delete(f"/api/admin/documents/{d['id']}", headers=headers)
    return Outcome(", ".join(map(str, codes)), all(c == 400 for c in codes))


def foreign_feedback(t: Target) -> Outcome:
    """Feedback on another user's message: does the answer give its conversation away?"""
    owner, other = t.staff("owner"), t.staff("other")
    with t.client() as http:
        turn = http.post(
            "/api/chat", json={"question": "hello", "stream": False}, headers=t.bearer(owner)
        ).json()
        done = next((e for e in turn.get("events", []) if e.get("type") == "done"), {})
        conversation, message = done.get("conversation_id"), done.get("message_id")
        if message is None:
            return Outcome("no answer to give feedback on", False)
        r = http.post(
            f"/api/messages/{message}/feedback", json={"rating": 1}, headers=t.bearer(other)
        )
    leaks = str(conversation) in r.text
    return Outcome(
        f"{r.status_code}{', names the conversation' if leaks else ''}",
        r.status_code == 404 and not leaks,
    )


def v1_error_shape(t: Target) -> Outcome:
    user = t.staff("v1")
    with t.client() as http:
        key = http.post("/api/keys", json={"name": "probe"}, headers=t.bearer(user)).json()["key"]
        r = http.post(
            "/v1/chat/completions",
            json={"messages": "not a list"},
            headers={"authorization": f"Bearer {key}"},
        )
    shaped = isinstance(r.json(), dict) and "error" in r.json()
    return Outcome(
        f"{r.status_code}, {'OpenAI shape' if shaped else 'FastAPI shape'}",
        r.status_code == 400 and shaped,
    )


def _running(t: Target, headers: dict[str, str]) -> float:
    with t.client() as http:
        text = http.get("/metrics", headers=headers).text
    for line in text.splitlines():
        if line.startswith("sglang:num_running_reqs"):
            return float(line.split()[-1])
    return -1.0


def unstreamed_disconnect(t: Target) -> Outcome:
    """A non-streamed answer (512 tokens allowed) whose client leaves after 1 s: is the
    engine still generating 3 s later?"""
    admin = t.bearer()
    with t.client() as http:
        before = http.get("/api/admin/settings", headers=admin).json()
        http.put(
            "/api/admin/settings",
            json={"max_new_tokens": 512, "min_new_tokens": 400},
            headers=admin,
        )
    user = t.staff("leaver")
    headers = t.bearer(user)

    question = {"question": "Tell me everything about VPN access, in detail.", "stream": False}
    try:
        # the client gives up after 1 s: that is the probe
        with contextlib.suppress(httpx.HTTPError):
            httpx.post(t.base + "/api/chat", json=question, headers=headers, timeout=1.0)
        time.sleep(3)
        running = _running(t, admin)
    finally:
        with t.client() as http:
            keep = {k: before[k] for k in ("max_new_tokens", "min_new_tokens") if k in before}
            http.put("/api/admin/settings", json=keep, headers=admin)
    return Outcome(f"{running:.0f} running 3 s after", running == 0)
