"""``appliance bench probes``: hostile and malformed requests against a running appliance, on
loopback, each with what it must get; a table of what each got.

    appliance bench probes --url http://127.0.0.1:7860 --admin admin --password PW

The run signs in as the admin, makes its own staff accounts through the admin API
(``probe-<run>-<role>``) and leaves no documents behind. It changes the chat settings for one
probe (a long answer) and puts them back. Run it against two versions side by side to see
what changed (the numbers in the first column are the items of the hardening issue; the
browser chat's concurrency is ``appliance bench load --browsers N``).
"""

from __future__ import annotations

import argparse
import getpass
import time
from collections.abc import Callable

from appliance.bench.probes import auth, content, gradio, inputs, web
from appliance.bench.probes.target import Outcome, Target
from appliance.bench.table import render, yes
from appliance.core.config import AppConfig

Probe = Callable[[Target], Outcome]
# (issue item, probe, what it must get, the probe)
CATALOG: tuple[tuple[str, str, str, Probe], ...] = (
    (
        "1",
        "another port posts to the key endpoint with the cookie",
        "403, no key",
        web.cross_origin_key,
    ),
    ("1", "CORS credentials for another port", "not allowed", web.cors_credentials),
    ("2", "12 failures from elsewhere, then the right password", "200", auth.lockout_of_another),
    ("2", "30 concurrent wrong guesses", "<= 5 checked", auth.burst),
    ("3", "1 GB upload without a token", "401 at once", web.unsigned_upload),
    ("3", "300 MB upload by an admin", "413 at once", web.oversized_upload),
    ("3", "5 MB body of the wrong shape", "< 4 KB back", web.echoed_body),
    ("4", "sign-in time: existing vs unknown user", "ratio < 2", auth.username_timing),
    ("6", "ids past 64 bits on 12 routes", "no 5xx", inputs.huge_ids),
    ("6", "nan, inf, 1e308, negative in 9 queries", "no 5xx", inputs.odd_numbers),
    ("6", "lone surrogate / invalid UTF-8 question", "4xx", inputs.lone_surrogate),
    ("7", "non-streamed answer, client gone after 1 s", "0 running", inputs.unstreamed_disconnect),
    ("8", "security headers on /login", "all four", web.security_headers),
    ("9", "GET /admin (no slash)", "a redirect", web.admin_without_slash),
    ("9", "GET /logout", "still signed in", web.get_logout),
    ("9", "file names with NUL, path parts, 600 chars", "none as given", inputs.hostile_filenames),
    ("9", "collection names '../x' and HTML", "400", inputs.hostile_collections),
    ("9", "feedback on another user's message", "404, no id", inputs.foreign_feedback),
    ("9", "admin password reset, then the user's key", "401", auth.reset_revokes_keys),
    ("9", "question of NUL and zero-width characters", "400", inputs.invisible_question),
    ("9", "/v1 validation error", "400, OpenAI shape", inputs.v1_error_shape),
    ("9", "GET /metrics without a login", "401", web.metrics_public),
    # issue #30 (security round 3): "30.<item>"
    ("30.1", "run history of the chat page and the console", "off on both", gradio.run_history),
    (
        "30.2",
        f"one user sends {gradio.FLOOD} questions at once",
        "<= 4 taken, rest busy",
        gradio.flood,
    ),
    (
        "30.3",
        "40 guesses, forged X-Forwarded-For each",
        "<= 5 checked",
        auth.forged_forwarded_for,
    ),
    ("30.3", "51 users fail from one address, then a known one", "200", auth.shared_address),
    ("30.4", "a staff cookie uploads to the chat page", "refused", gradio.chat_upload),
    ("30.5", "staff fetch a file uploaded in the console", "refused", gradio.console_file),
    ("30.5", "file= and proxy= with a remote URL", "refused", gradio.remote_file),
    ("30.6", "link, image, HTML planted in a document", "card: no markup", content.card_markup),
    ("30.7", "collection revoked, then follow-up", "none of its text", content.revoked_collection),
    ("30.8", "queue/join with event 9999 and -1", "4xx", gradio.bad_event_index),
    (
        "30.9",
        "20 made-up API keys, then a valid one",
        "<= 5 401 + audited, 200",
        auth.wrong_api_keys,
    ),
    ("30.9", "user disabled and enabled, then the old key", "401", auth.reenabled_user_key),
    ("30.9", "Host: rebind.attacker.example", "400", gradio.foreign_host),
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="appliance bench probes", description=__doc__)
    p.add_argument("--url", default="http://127.0.0.1:7860")
    p.add_argument("--admin", default="admin", help="an administrator's username")
    p.add_argument("--password", help="the administrator's password (asked when not given)")
    p.add_argument("--only", default="", help="run only probes whose item is in this list: 1,3")
    return p


def run(target: Target, only: set[str] | None = None) -> list[list[object]]:
    """Every probe (of the ``only`` items), in order: its row of the table."""
    rows: list[list[object]] = []
    for item, name, expected, probe in CATALOG:
        if only and item not in only:
            continue
        started = time.monotonic()
        try:
            outcome = probe(target)
        except Exception as exc:  # a probe that breaks is a finding, not a crash of the run
            outcome = Outcome(f"probe failed: {type(exc).__name__}: {exc}"[:90], False)
        took = f"{time.monotonic() - started:.1f}"
        rows.append([item, name, expected, outcome.got, yes(outcome.ok), took])
    return rows


def main(argv: list[str], config: AppConfig) -> int:
    args = _parser().parse_args(argv)
    password = args.password or getpass.getpass(f"password of {args.admin}: ")
    target = Target(args.url.rstrip("/"), args.admin, password)
    only = {s.strip() for s in args.only.split(",") if s.strip()} or None
    rows = run(target, only)
    print(render(["item", "probe", "must get", "got", "ok", "s"], rows))
    bad = sum(r[4] != "yes" for r in rows)
    print(f"{len(rows) - bad} of {len(rows)} probes got what they must")
    return 1 if bad else 0
