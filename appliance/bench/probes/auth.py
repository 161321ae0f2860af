"""Probes of sign-in: lockout of someone else, racing the failure count, telling usernames
apart by timing, and what a password reset does to API keys.

Other client addresses are other loopback addresses (``127.0.0.2`` ...): Linux answers the
whole 127/8 on ``lo``, so the server sees each as a different client."""

from __future__ import annotations

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
