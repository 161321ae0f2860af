"""Issue #22: the login lock was a denial of service and could be raced. Five bad passwords
locked a username for everyone, the right password included, so anyone could keep the admin
out; and the count was read from the audit log before each check, so a burst of guesses got
far more password checks than the limit (and the right password got in while its neighbours
were refused).

Each test uses fresh accounts and a loopback source address of its own (127.0.0.x: all of
127/8 reaches the site at 127.0.0.1), so the shared site's other users are not held back."""

from __future__ import annotations

import secrets
import threading
import time

import httpx
from sqlalchemy import select

from appliance.core.db.models import AuditEvent, LoginCounter

PASSWORD = "password-789"
MAX_FAILURES = 5  # the site's security.login_max_failures (the default)


def _client(site, address: str) -> httpx.Client:  # noqa: ANN001
    transport = httpx.HTTPTransport(local_address=address)
    return httpx.Client(base_url=site.base, transport=transport, timeout=60)


def _user(site) -> str:  # noqa: ANN001
    name = f"thr-{secrets.token_hex(3)}"
    site.auth.create_user(name, PASSWORD)
    return name


def _checked(site, username: str) -> list[str]:  # noqa: ANN001
    """The audited outcomes of real password checks of ``username`` (not the refusals)."""
    with site.appliance.db.session() as s:
        return list(
            s.scalars(
                select(AuditEvent.action).where(
                    AuditEvent.actor == username,
                    AuditEvent.action.in_(("login.ok", "login.failed")),
                )
            )
        )


def _burst(site, address: str, bodies: list[dict]) -> list[httpx.Response]:  # noqa: ANN001
    """POST every body to /api/login at once (a connection each, released by a barrier)."""
    start = threading.Barrier(len(bodies))
    answers: list[httpx.Response | None] = [None] * len(bodies)

    def send(i: int) -> None:
        with _client(site, address) as client:
            start.wait()
            answers[i] = client.post("/api/login", json=bodies[i])

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(bodies))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert all(a is not None for a in answers)
    return answers  # type: ignore[return-value]


def test_someone_elses_failures_from_another_address_do_not_lock_the_user_out(site) -> None:  # noqa: ANN001
    """An attacker at 127.0.0.2 fails the user's password until refused; the user, signing in
    from 127.0.0.1 with the right password, still gets in (before: 429 for 300 s)."""
    victim = _user(site)
    wrong = {"username": victim, "password": "not-the-password"}
    with _client(site, "127.0.0.2") as attacker:
        codes = [attacker.post("/api/login", json=wrong).status_code for _ in range(8)]
    assert codes == [401] * MAX_FAILURES + [429] * 3
    right = httpx.post(
        f"{site.base}/api/login", json={"username": victim, "password": PASSWORD}, timeout=60
    )
    assert right.status_code == 200 and right.json()["username"] == victim


def test_a_concurrent_burst_gets_exactly_max_failures_password_checks(site) -> None:  # noqa: ANN001
    """30 wrong guesses at once from one address: exactly login_max_failures passwords are
    checked (audited login.failed), the other 25 are refused unchecked with Retry-After
    (before: 19 of 30 were checked)."""
    victim = _user(site)
    answers = _burst(site, "127.0.0.3", [{"username": victim, "password": "guess-123"}] * 30)
    codes = sorted(a.status_code for a in answers)
    assert codes == [401] * MAX_FAILURES + [429] * (30 - MAX_FAILURES)
    assert _checked(site, victim) == ["login.failed"] * MAX_FAILURES
    assert all(int(a.headers["retry-after"]) >= 1 for a in answers if a.status_code == 429)


def test_the_right_password_inside_a_burst_is_refused_like_its_neighbours(site) -> None:  # noqa: ANN001
    """23 wrong guesses at once from one address, and the right password from the same address
    sent while they are in flight, once they have used up the checks: the right password is
    refused like its neighbours, unchecked (before: it got in while they got 429)."""
    victim = _user(site)
    address = "127.0.0.4"
    wrong = [{"username": victim, "password": f"guess-{i:03d}"} for i in range(23)]
    burst = threading.Thread(target=_burst, args=(site, address, wrong))
    burst.start()
    try:
        deadline = time.monotonic() + 60
        while True:  # wait for the burst to have claimed every check it may
            with site.appliance.db.session() as s:
                used = s.scalar(
                    select(LoginCounter.failures).where(
                        LoginCounter.scope == "pair",
                        LoginCounter.address == address,
                        LoginCounter.username == victim,
                    )
                )
            if used == MAX_FAILURES:
                break
            assert time.monotonic() < deadline, "the burst did not start"
            time.sleep(0.005)
        with _client(site, address) as client:
            right = client.post("/api/login", json={"username": victim, "password": PASSWORD})
    finally:
        burst.join(120)
    assert right.status_code == 429 and int(right.headers["retry-after"]) >= 1
    assert _checked(site, victim) == ["login.failed"] * MAX_FAILURES  # never checked


def test_the_web_form_refuses_with_retry_after(site) -> None:  # noqa: ANN001
    """The sign-in form's 429 says when to come back, in the page and in Retry-After
    (before: the page only)."""
    victim = _user(site)
    form = {"username": victim, "password": "not-the-password"}
    with _client(site, "127.0.0.5") as client:
        for _ in range(MAX_FAILURES):
            assert client.post("/login", data=form).status_code == 401
        refused = client.post("/login", data={**form, "password": PASSWORD})
    assert refused.status_code == 429
    seconds = int(refused.headers["retry-after"])
    assert 1 <= seconds <= 30 and f"Try again in {seconds} seconds" in refused.text
