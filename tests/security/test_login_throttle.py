"""Issue #22: the login lock was a denial of service and could be raced. Five bad passwords
locked a username for everyone, the right password included, so anyone could keep the admin
out; and the count was read from the audit log before each check, so a burst of guesses got
far more password checks than the limit (and the right password got in while its neighbours
were refused).

Each test uses fresh accounts and a loopback source address of its own (127.0.0.x: all of
127/8 reaches the site at 127.0.0.1), so the shared site's other users are not held back.

Then the client address (a later issue): ``X-Forwarded-For`` was believed from 127.0.0.1, so
every guess could name a fresh client, or a victim's; behind a proxy that forwards nothing,
everyone was one address that 51 failures locked; and a success re-armed the back-off. Those
tests run a site of their own on each database."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from support.clock import Clock

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


# ---- the client address (issue: the throttle's address was forgeable, or shared) ---------


@pytest.fixture(params=["sqlite", "postgresql"])
def served(request: pytest.FixtureRequest, own_site) -> Callable[..., Any]:  # noqa: ANN001
    """``with served(security={...}) as s``: a site of its own, on each database."""
    if request.param == "sqlite":
        return own_site
    pg_url = request.getfixturevalue("pg_url")
    return lambda **sections: own_site(database={"url": pg_url}, **sections)


def _clients(site, username: str) -> list[str]:  # noqa: ANN001
    """The client address of each audited login of ``username``, oldest first."""
    with site.appliance.db.session() as s:
        query = select(AuditEvent.detail).where(AuditEvent.actor == username)
        return [d["client"] for d in s.scalars(query.order_by(AuditEvent.id))]


def test_a_forged_forwarded_for_is_not_believed_by_default(served) -> None:  # noqa: ANN001
    """40 wrong guesses, each naming a fresh client in ``X-Forwarded-For``: with no trusted
    proxy configured (the default) they are one client, so only login_max_failures are
    checked (before: uvicorn believed the header from 127.0.0.1, and all 40 were checked)."""
    with served(security={}) as site:
        victim = _user(site)
        wrong = {"username": victim, "password": "not-the-password"}
        with _client(site, "127.0.0.1") as client:
            codes = [
                client.post(
                    "/api/login", json=wrong, headers={"x-forwarded-for": f"10.66.{i}.{i + 1}"}
                ).status_code
                for i in range(40)
            ]
        assert codes == [401] * MAX_FAILURES + [429] * (40 - MAX_FAILURES)
        assert set(_clients(site, victim)) == {"127.0.0.1"}


def test_a_trusted_proxy_names_the_client_and_forged_hops_are_not_believed(served) -> None:  # noqa: ANN001
    """Behind a configured proxy (127.0.0.1, and a proxy network 10.9.0.0/16 in front of it),
    the client is the right-most forwarded address that is not a proxy: whatever the client
    forges left of it, its failures count against it alone; the right password from another
    client behind the same proxy gets in; a peer that is no proxy is believed nothing, and a
    malformed header names no one."""
    proxies = {"trusted_proxies": ["127.0.0.1", "10.9.0.0/16"]}
    with served(security=proxies) as site:
        victim = _user(site)
        wrong = {"username": victim, "password": "not-the-password"}
        with _client(site, "127.0.0.1") as proxy:
            codes = [
                proxy.post(
                    "/api/login",
                    json=wrong,
                    headers={"x-forwarded-for": f"10.66.0.{i}, 192.0.2.7, 10.9.4.4"},
                ).status_code
                for i in range(8)
            ]
            assert codes == [401] * MAX_FAILURES + [429] * 3
            right = {"username": victim, "password": PASSWORD}
            ok = proxy.post("/api/login", json=right, headers={"x-forwarded-for": "192.0.2.8"})
            assert ok.status_code == 200
            junk = proxy.post("/api/login", json=wrong, headers={"x-forwarded-for": "junk"})
            assert junk.status_code == 401
        with _client(site, "127.0.0.2") as stranger:
            forged = stranger.post("/api/login", json=wrong, headers={"x-forwarded-for": "1.2.3.4"})
            assert forged.status_code == 401
        assert _clients(site, victim) == ["192.0.2.7"] * 8 + ["192.0.2.8", "127.0.0.1"] + [
            "127.0.0.2"
        ]


def test_the_scheme_follows_trusted_proxies_only(served) -> None:  # noqa: ANN001
    """``X-Forwarded-Proto: https`` from a trusted proxy makes the session cookie Secure;
    from anyone else it is ignored (before: uvicorn believed it from 127.0.0.1 only, whatever
    the site's proxies; there was no setting)."""
    with served(security={"trusted_proxies": ["127.0.0.1"]}) as site:
        form = {"username": "alice", "password": PASSWORD}
        https = {"x-forwarded-proto": "https"}
        with _client(site, "127.0.0.1") as proxy:
            secure = proxy.post("/login", data=form, headers=https)
        with _client(site, "127.0.0.3") as stranger:
            plain = stranger.post("/login", data=form, headers=https)
        assert secure.status_code == plain.status_code == 303
        assert "secure" in secure.headers["set-cookie"].lower()
        assert "secure" not in plain.headers["set-cookie"].lower()


def test_a_shared_address_does_not_lock_out_a_user_who_signed_in_from_it(served) -> None:  # noqa: ANN001
    """Everyone behind one proxy is one address: 51 wrong logins for 51 usernames from it
    back the address off for new usernames, but a user who signed in from it before still
    gets in with the right password (before: 429 for everyone there)."""
    with served(security={}) as site:
        regular = _user(site)
        right = {"username": regular, "password": PASSWORD}
        with _client(site, "127.0.0.41") as shared:
            assert shared.post("/api/login", json=right).status_code == 200
            codes = [
                shared.post(
                    "/api/login", json={"username": f"spray-{i}", "password": "Winter2030!"}
                ).status_code
                for i in range(51)
            ]
            assert codes == [401] * 50 + [429]
            spray = {"username": "spray-51", "password": "Winter2030!"}
            assert shared.post("/api/login", json=spray).status_code == 429
            assert shared.post("/api/login", json=right).status_code == 200


def test_a_success_after_the_window_does_not_re_arm_the_back_off(served) -> None:  # noqa: ANN001
    """The address reaches its limit; a window (300 s) after the last failure the right
    password gets in, and the next attempt from there is checked, not backed off (before:
    the success counted as a check, so the address backed off for 30 s after every
    success and its failures were never forgotten while people kept signing in)."""
    with served(security={"login_address_max_failures": 3}) as site:
        clock = Clock()
        site.auth.throttle.clock = clock
        newcomer = _user(site)
        with _client(site, "127.0.0.42") as client:

            def attempt(username: str, password: str = "not-the-password") -> int:
                body = {"username": username, "password": password}
                return client.post("/api/login", json=body).status_code

            assert [attempt(f"guess-{i}") for i in range(4)] == [401] * 3 + [429]
            clock.advance(301)
            assert attempt(newcomer, PASSWORD) == 200
            clock.advance(1)
            assert attempt("guess-4") == 401
