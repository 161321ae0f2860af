"""Probes of sign-in: lockout of someone else, racing the failure count, telling usernames
apart by timing, forging the client address, a shared address, what a password reset and
re-enabling a user do to API keys, and guessing API keys.

Other client addresses are other loopback addresses (``127.0.0.2`` ...): Linux answers the
whole 127/8 on ``lo``, so the server sees each as a different client."""

from __future__ import annotations

import json
import secrets
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from appliance.bench.probes.target import Outcome, Target


def lockout_of_another(t: Target) -> Outcome:
    """Twelve wrong passwords for a user from one address; then the right one from another."""
    victim = t.staff("victim")
    with t.client("127.0.0.2") as attacker:
        for _ in range(12):
            attacker.post("/api/login", json={"username": victim, "password": "wrong-password"})
    with t.client() as http:
        r = http.post("/api/login", json={"username": victim, "password": t.passwords[victim]})
    return Outcome(f"the right password: {r.status_code}", r.status_code == 200)


def burst(t: Target) -> Outcome:
    """30 wrong guesses at once from one address: how many were really checked (401)?"""
    user = t.staff("burst")

    def guess(_: int) -> int:
        with t.client("127.0.0.3") as http:
            return http.post(
                "/api/login", json={"username": user, "password": "wrong-password"}
            ).status_code

    with ThreadPoolExecutor(30) as pool:
        codes = list(pool.map(guess, range(30)))
    checked = codes.count(401)
    return Outcome(f"{checked} checked, {codes.count(429)} refused", checked <= 5)


def username_timing(t: Target) -> Outcome:
    """Median sign-in time of an existing user vs an unknown one (wrong passwords, each from
    its own address so that no back-off starts)."""
    user = t.staff("timing")

    def timed(name: str, n: int) -> float:
        with t.client(f"127.0.{10 + n}.1") as http:
            started = time.perf_counter()
            http.post("/api/login", json={"username": name, "password": "wrong-password"})
            return time.perf_counter() - started

    known = [timed(user, i) for i in range(8)]
    unknown = [timed(f"nobody-{t.run_id}-{i}", 20 + i) for i in range(8)]
    a, b = statistics.median(known) * 1000, statistics.median(unknown) * 1000
    ratio = max(a, b) / max(min(a, b), 0.001)
    return Outcome(f"{a:.1f} ms vs {b:.1f} ms (x{ratio:.1f})", ratio < 2)


def reset_revokes_keys(t: Target) -> Outcome:
    """An admin resets a user's password: does that user's API key stop working?"""
    user = t.staff("reset")
    with t.client() as http:
        key = http.post("/api/keys", json={"name": "probe"}, headers=t.bearer(user)).json()["key"]
        http.post(f"/api/admin/users/{user}/password", json={}, headers=t.bearer())
        r = http.get("/v1/models", headers={"authorization": f"Bearer {key}"})
    return Outcome(f"the old key: {r.status_code}", r.status_code == 401)


def forged_forwarded_for(t: Target) -> Outcome:
    """40 wrong guesses from 127.0.0.1, each naming a fresh client in ``X-Forwarded-For``: how
    many were checked (401)? (With no trusted proxy configured, the header names no one.)"""
    victim = t.staff("forged")
    wrong = {"username": victim, "password": "wrong-password"}
    with t.client() as http:
        codes = [
            http.post(
                "/api/login", json=wrong, headers={"x-forwarded-for": f"10.{i}.{i}.{i + 1}"}
            ).status_code
            for i in range(40)
        ]
    checked = codes.count(401)
    return Outcome(f"{checked} checked, {codes.count(429)} refused", checked <= 5)


def shared_address(t: Target) -> Outcome:
    """A user signs in from one address; then 51 wrong logins for 51 other usernames from it
    (everyone behind one proxy); then the user's right password from it."""
    user = t.staff("shared")
    right = {"username": user, "password": t.passwords[user]}
    with t.client("127.0.0.60") as http:
        http.post("/api/login", json=right)
        for i in range(51):
            spray = {"username": f"nobody-{t.run_id}-{i}", "password": "Winter2030!"}
            http.post("/api/login", json=spray)
        r = http.post("/api/login", json=right)
    return Outcome(f"the right password: {r.status_code}", r.status_code == 200)


def _failed_keys_audited(t: Target, address: str) -> int:
    """How many ``login.api_key.failed`` rows the audit log holds for ``address``."""
    with t.client() as http:
        rows = http.get(
            "/api/admin/audit", params={"category": "logins", "limit": 2000}, headers=t.bearer()
        ).json()
    return sum(
        r["action"] == "login.api_key.failed"
        and json.loads(r["detail"] or "{}").get("client") == address
        for r in rows
    )


def wrong_api_keys(t: Target) -> Outcome:
    """20 made-up API keys from one address: how many were checked (401), how many audited;
    and does a valid key from that address still work?"""
    user = t.staff("keys")
    address = "127.0.0.61"
    with t.client(address) as http:
        made = http.post("/api/keys", json={"name": "probe"}, headers=t.bearer(user))
        key = made.json()["key"]
        codes = [
            http.get(
                "/v1/models", headers={"authorization": f"Bearer sk-{secrets.token_urlsafe(32)}"}
            ).status_code
            for _ in range(20)
        ]
        valid = http.get("/v1/models", headers={"authorization": f"Bearer {key}"}).status_code
    checked, audited = codes.count(401), _failed_keys_audited(t, address)
    got = f"{checked} checked, {audited} audited, valid key {valid}"
    return Outcome(got, checked <= 5 and 1 <= audited <= 5 and valid == 200)


def reenabled_user_key(t: Target) -> Outcome:
    """An admin disables a user and enables them again: does the user's old API key work?"""
    user = t.staff("reenabled")
    with t.client() as http:
        key = http.post("/api/keys", json={"name": "probe"}, headers=t.bearer(user)).json()["key"]
        admin = t.bearer()
        for disabled in (True, False):
            http.patch(f"/api/admin/users/{user}", json={"disabled": disabled}, headers=admin)
        r = http.get("/v1/models", headers={"authorization": f"Bearer {key}"})
    return Outcome(f"the old key: {r.status_code}", r.status_code == 401)
