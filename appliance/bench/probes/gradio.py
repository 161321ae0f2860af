"""Probes of the Gradio pages' own routes and of the browser chat's line (issue #30): run
history, one user flooding the chat, uploads and files by role, fetching from elsewhere,
malformed queue joins, and a ``Host`` that names another site."""

from __future__ import annotations

import secrets
from concurrent.futures import ThreadPoolExecutor

import httpx

from appliance.bench.probes.target import Outcome, Target

FLOOD = 12  # questions one user sends at once
SHARE = 4  # what one user may hold in the line by default (2 generating, 2 waiting)


def run_history(t: Target) -> Outcome:
    """Does either Gradio page keep its calls (passwords, new keys) in the browser?"""
    user = t.staff("history")
    kept = []
    with t.signed_in_browser(user) as http:
        for prefix in ("", "/admin"):
            config = http.get(f"{prefix}/gradio_api/config")
            if config.status_code == 200 and config.json().get("run_history", True):
                kept.append(prefix or "/")
    return Outcome(f"run history on: {', '.join(kept) or 'none'}", not kept)


def _respond(http: httpx.Client) -> str:
    names = http.get("/gradio_api/info").json().get("named_endpoints", {})
    return next((n for n in names if n.strip("/") == "respond"), "/respond")


def flood(t: Target) -> Outcome:
    """One staff cookie sends ``FLOOD`` questions at once through the chat page: how many
    were taken, and were the rest told the chat is busy?"""
    user = t.staff("flood")
    with t.signed_in_browser(user) as http:
        endpoint = _respond(http)

        def one(i: int) -> str:
            data = [f"What is on page {i} of the handbook?", None, [], [], "en"]
            r = http.post(f"/gradio_api/call{endpoint}", json={"data": data})
            if r.status_code != 200:
                return f"join {r.status_code}"
            stream = http.get(
                f"/gradio_api/call{endpoint}/{r.json()['event_id']}", timeout=600
            ).text
            return "busy" if "turn-note busy" in stream else "taken"

        with ThreadPoolExecutor(FLOOD) as pool:
            outcomes = list(pool.map(one, range(FLOOD)))
    taken, busy = outcomes.count("taken"), outcomes.count("busy")
    return Outcome(f"{taken} taken, {busy} told busy", taken <= SHARE and taken + busy == FLOOD)


def _upload(http: httpx.Client, path: str) -> httpx.Response:
    body = f"probe {secrets.token_hex(8)}".encode()
    return http.post(path, files={"files": ("probe.txt", body)})


def chat_upload(t: Target) -> Outcome:
    """A staff cookie posts a file to the chat page, which has no upload."""
    user = t.staff("upload")
    with t.signed_in_browser(user) as http:
        r = _upload(http, "/gradio_api/upload")
    return Outcome(f"{r.status_code}", r.status_code in (401, 403, 404))


def console_file(t: Target) -> Outcome:
    """An admin uploads a file in the console; can a staff cookie download it?"""
    admin = t.client()
    with admin:
        form = {"username": t.admin_user, "password": t.admin_password}
        admin.post("/login", data=form)
        stored = _upload(admin, "/admin/gradio_api/upload").json()[0]
    user = t.staff("files")
    with t.signed_in_browser(user) as http:
        codes = [http.get(f"{p}/gradio_api/file={stored}").status_code for p in ("/admin", "")]
    return Outcome(f"console {codes[0]}, chat page {codes[1]}", 200 not in codes)


def remote_file(t: Target) -> Outcome:
    """``file=`` and ``proxy=`` with a URL: does the box fetch it from elsewhere?"""
    user = t.staff("remote")
    with t.signed_in_browser(user) as http:
        codes = [
            http.get(path).status_code
            for path in (
                "/gradio_api/file=https://example.com/x.png",
                "/admin/gradio_api/file=https://example.com/x.png",
                "/gradio_api/proxy=https://example.com/",
            )
        ]
    return Outcome(" ".join(map(str, codes)), all(c in (401, 403, 404) for c in codes))


def bad_event_index(t: Target) -> Outcome:
    """``queue/join`` naming event 9999 and -1."""
    user = t.staff("join")
    with t.signed_in_browser(user) as http:
        codes = [
            http.post(
                "/gradio_api/queue/join",
                json={"data": [], "fn_index": index, "session_hash": "probe00001"},
            ).status_code
            for index in (9999, -1)
        ]
    return Outcome(" ".join(map(str, codes)), all(400 <= c < 500 for c in codes))


def foreign_host(t: Target) -> Outcome:
    """A request whose ``Host`` names another site (a DNS-rebinding page)."""
    code = t.status("GET", "/login", headers={"host": "rebind.attacker.example"})
    return Outcome(f"{code}", code in (400, 421))
