"""The login throttle on both databases: per (username, address) and per address back-offs
that double up to a cap, a quiet window that forgets, a success that clears without re-arming,
an address that holds back only pairs it does not know, invalid API keys counted per address,
stale counters purged, and claims counted atomically by concurrent workers (each with its own
engine)."""

from __future__ import annotations

import threading
from datetime import UTC, timedelta

from sqlalchemy import func, select
from support.clock import Clock

from appliance.core.auth.throttle import LoginThrottle, ThrottlePolicy
from appliance.core.db.models import LoginCounter
from appliance.core.db.session import Database


def test_a_pair_backs_off_doubling_to_the_cap_and_a_success_clears_it(db: Database) -> None:
    # a hand-moved clock: a loaded CI box can take longer between two claims than a back-off
    clock = Clock()
    policy = ThrottlePolicy(max_failures=3, window_s=60, backoff_s=0.4, lockout_s=1.0)
    throttle = LoginThrottle(db, policy, clock=clock)
    assert [throttle.claim("kim", "10.0.0.1").allowed for _ in range(4)] == [True] * 3 + [False]
    clock.advance(0.1)
    refused = throttle.claim("kim", "10.0.0.1")
    assert not refused.allowed and refused.retry_after == 0.3
    # only that pair: the same user from elsewhere, and others from there, are checked
    assert throttle.claim("kim", "10.0.0.2").allowed
    assert throttle.claim("lee", "10.0.0.1").allowed
    clock.advance(0.35)
    assert throttle.claim("kim", "10.0.0.1").allowed  # one more check after the back-off...
    doubled = throttle.claim("kim", "10.0.0.1")  # ...then twice as long
    assert not doubled.allowed and doubled.retry_after == 0.8
    clock.advance(0.79)
    assert not throttle.claim("kim", "10.0.0.1").allowed  # still within the doubled back-off
    clock.advance(0.02)
    assert throttle.claim("kim", "10.0.0.1").allowed
    capped = throttle.claim("kim", "10.0.0.1")  # 1.6 s, capped at lockout_s
    assert not capped.allowed and capped.retry_after == 1.0
    clock.advance(1.01)
    right = throttle.claim("kim", "10.0.0.1")
    assert right.allowed
    throttle.succeeded(right)  # the right password: the pair starts afresh
    assert [throttle.claim("kim", "10.0.0.1").allowed for _ in range(4)] == [True] * 3 + [False]


def test_an_address_backs_off_whatever_the_usernames(db: Database) -> None:
    policy = ThrottlePolicy(max_failures=10, backoff_s=30, address_max_failures=4)
    throttle = LoginThrottle(db, policy)
    claims = [throttle.claim(f"user{i}", "10.0.0.9") for i in range(3)]
    assert all(c.allowed for c in claims)
    right = throttle.claim("user3", "10.0.0.9")
    throttle.succeeded(right)  # a success takes its own claim back from the address...
    assert throttle.claim("user4", "10.0.0.9").allowed  # ...so this is the 4th failure
    sprayed = throttle.claim("user5", "10.0.0.9")
    assert not sprayed.allowed and 29 < sprayed.retry_after <= 30
    assert not throttle.claim("user0", "10.0.0.9").allowed
    assert throttle.claim("user5", "10.0.0.10").allowed  # another address is not held back
    with db.session() as s:  # a refused address creates no counter per username
        pairs = select(LoginCounter.username).where(
            LoginCounter.scope == "pair", LoginCounter.address == "10.0.0.9"
        )
        assert set(s.scalars(pairs)) == {"user0", "user1", "user2", "user4"}  # user3: cleared


def test_failures_are_forgotten_after_a_quiet_window(db: Database) -> None:
    clock = Clock()
    policy = ThrottlePolicy(max_failures=2, window_s=0.3, backoff_s=30)
    throttle = LoginThrottle(db, policy, clock=clock)
    assert throttle.claim("park", "10.0.0.1").allowed
    clock.advance(0.35)
    assert throttle.claim("park", "10.0.0.1").allowed  # the first failure is forgotten,
    assert throttle.claim("park", "10.0.0.1").allowed  # so this is only the second
    assert not throttle.claim("park", "10.0.0.1").allowed


def test_stale_counters_are_purged(db: Database) -> None:
    clock = Clock()
    policy = ThrottlePolicy(max_failures=1, window_s=0.1, backoff_s=0.1, lockout_s=0.1)
    throttle = LoginThrottle(db, policy, clock=clock)
    throttle.claim("choi", "10.0.0.1")
    throttle.claim("jung", "10.0.0.2")
    assert throttle.purge() == 0  # still in use
    clock.advance(0.25)
    throttle.claim("jung", "10.0.0.2")  # refreshed: stays
    assert throttle.purge() == 2  # choi's pair and address
    with db.session() as s:
        assert s.scalar(select(func.count()).select_from(LoginCounter)) == 2


def _burst(throttles: list[LoginThrottle], names: list[str], address: str) -> list[bool]:
    """Every throttle claims its name at once (released by a barrier); who was allowed."""
    start = threading.Barrier(len(throttles))
    allowed: list[bool] = []

    def guess(t: LoginThrottle, name: str) -> None:
        start.wait()
        allowed.append(t.claim(name, address).allowed)

    threads = [
        threading.Thread(target=guess, args=pair) for pair in zip(throttles, names, strict=True)
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert len(allowed) == len(throttles)
    return allowed


def test_concurrent_claims_from_many_workers_are_counted_exactly(db_url: str, db: Database) -> None:
    """30 workers (each its own engine and connections) claim at once: exactly the limit's
    worth of checks is allowed, for a pair, and for an address. (On SQLite this holds because
    the claim's first statement writes: a read first would let all 30 through.)"""
    workers = [Database(db_url) for _ in range(30)]
    try:
        pair = ThrottlePolicy(max_failures=5, address_max_failures=1000)
        # one failure first, so the burst finds the counters there (no insert takes the lock)
        assert LoginThrottle(db, pair).claim("root", "10.1.0.1").allowed
        allowed = _burst([LoginThrottle(w, pair) for w in workers], ["root"] * 30, "10.1.0.1")
        assert sum(allowed) == 4
        spray = ThrottlePolicy(max_failures=1000, address_max_failures=7)
        names = [f"user{i}" for i in range(30)]
        allowed = _burst([LoginThrottle(w, spray) for w in workers], names, "10.1.0.2")
        assert sum(allowed) == 7
    finally:
        for w in workers:
            w.dispose()


def test_a_success_does_not_re_arm_the_address_back_off(db: Database) -> None:
    """The address reaches its limit; more than a window after the last failure (but inside
    the window counted from the end of the back-off) the right password gets in, and the next
    check is not held back (before: the success counted as a check at that moment, so the
    address backed off again for backoff_s after every success, and its window never ran out
    while people kept signing in)."""
    clock = Clock()
    policy = ThrottlePolicy(max_failures=10, address_max_failures=3, backoff_s=30, window_s=300)
    throttle = LoginThrottle(db, policy, clock=clock)
    assert all(throttle.claim(f"guess{i}", "10.0.0.7").allowed for i in range(3))
    assert not throttle.claim("guess3", "10.0.0.7").allowed
    clock.advance(301)
    right = throttle.claim("kim", "10.0.0.7")
    assert right.allowed
    throttle.succeeded(right)
    clock.advance(1)
    assert throttle.claim("guess4", "10.0.0.7").allowed
    # successes every 20 s move nothing: the address's latest counted failure stays guess4's,
    # so its back-off and window run from then, however often someone signs in
    for _ in range(3):
        clock.advance(20)
        right = throttle.claim("kim", "10.0.0.7")
        assert right.allowed
        throttle.succeeded(right)
    with db.session() as s:
        row = s.get(LoginCounter, ("address", "10.0.0.7", ""))
        assert row.failures == 4 and row.last_at.replace(tzinfo=UTC) == clock.now - timedelta(
            seconds=60
        )


def test_a_shared_address_holds_back_unknown_pairs_only(db: Database) -> None:
    """Everyone behind one proxy shares an address: spraying from it backs the address off
    for new (username, address) pairs, but a user who signed in from it before still gets
    checked, and in (before: the right password was refused like the sprayer's)."""
    clock = Clock()
    policy = ThrottlePolicy(max_failures=5, address_max_failures=4, backoff_s=30)
    throttle = LoginThrottle(db, policy, clock=clock)
    throttle.succeeded(throttle.claim("alice", "10.0.0.8"))  # alice signed in yesterday
    clock.advance(86400)
    assert all(throttle.claim(f"spray{i}", "10.0.0.8").allowed for i in range(4))
    assert not throttle.claim("spray4", "10.0.0.8").allowed
    assert not throttle.claim("newcomer", "10.0.0.8").allowed  # unknown here: held back
    alice = throttle.claim("alice", "10.0.0.8")
    assert alice.allowed
    throttle.succeeded(alice)
    # alice's own pair still backs off after her own limit of wrong passwords
    assert all(throttle.claim("alice", "10.0.0.8").allowed for _ in range(5))
    assert not throttle.claim("alice", "10.0.0.8").allowed
    # a known pair is forgotten after known_s
    clock.advance(policy.known_s + 1)
    assert throttle.purge() >= 1
    with db.session() as s:
        assert s.get(LoginCounter, ("known", "10.0.0.8", "alice")) is None


def test_invalid_api_keys_back_off_per_address(db: Database) -> None:
    clock = Clock()
    throttle = LoginThrottle(db, ThrottlePolicy(max_failures=3, backoff_s=30), clock=clock)
    assert [throttle.claim_key("10.0.0.9").allowed for _ in range(4)] == [True] * 3 + [False]
    refused = throttle.claim_key("10.0.0.9")
    assert not refused.allowed and refused.retry_after == 30
    assert throttle.claim_key("10.0.0.10").allowed  # another address is not held back
    assert throttle.claim("kim", "10.0.0.9").allowed  # nor are passwords from that one
    clock.advance(30)
    assert throttle.claim_key("10.0.0.9").allowed
    assert throttle.claim_key("10.0.0.9").retry_after == 60
