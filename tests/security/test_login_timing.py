"""Issue #22: usernames could be found by timing. A login for an existing user ran Argon2
(median 112 ms) and one for an unknown user returned at once (4.5 ms), so anyone could list
the accounts. Now an unknown (or disabled) user's password is checked against a dummy hash.

Each try comes from a loopback address of its own (127.0.1.x), so the throttle (per username
and address) never cuts a try short."""

from __future__ import annotations

import secrets
import statistics
import time

import httpx

PASSWORD = "password-789"
TRIES = 11


def _timed_login(base: str, address: str, username: str) -> float:
    transport = httpx.HTTPTransport(local_address=address)
    with httpx.Client(base_url=base, transport=transport, timeout=60) as client:
        client.get("/health")  # the connection is set up before the clock starts
        started = time.perf_counter()
        answer = client.post("/api/login", json={"username": username, "password": "wrong-pw"})
        elapsed = time.perf_counter() - started
    assert answer.status_code == 401 and answer.json() == {"detail": "wrong username or password"}
    return elapsed


def test_an_unknown_username_takes_as_long_as_a_wrong_password(site) -> None:  # noqa: ANN001
    """Medians over 11 tries each (interleaved) of a wrong password for an existing user and
    for an unknown one are within a factor of 2, and the answers are the same."""
    existing = f"time-{secrets.token_hex(3)}"
    site.auth.create_user(existing, PASSWORD)
    unknown = f"nobody-{secrets.token_hex(3)}"
    _timed_login(site.base, "127.0.1.250", existing)  # warm up both paths
    _timed_login(site.base, "127.0.1.251", unknown)
    known_s, unknown_s = [], []
    for i in range(TRIES):
        known_s.append(_timed_login(site.base, f"127.0.1.{2 * i + 1}", existing))
        unknown_s.append(_timed_login(site.base, f"127.0.1.{2 * i + 2}", unknown))
    a, b = statistics.median(known_s), statistics.median(unknown_s)
    assert max(a, b) / min(a, b) < 2, f"existing {a * 1000:.1f} ms, unknown {b * 1000:.1f} ms"
