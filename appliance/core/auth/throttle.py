"""Login throttling counted in the database, so that every worker shares one count.

Two counters are kept (``LoginCounter`` rows): failed password checks of one (username, client
address) pair, and of one client address for any usernames. When a counter reaches its limit
(``max_failures`` for a pair, ``address_max_failures`` for an address) it backs off: no password
is checked for ``backoff_s`` after the latest counted check, twice that after the next one, and
so on up to ``lockout_s``. Failures are forgotten once ``window_s`` has passed without one
(counted from the end of any back-off). Only the pair and address that failed are held back: the
right password from another address is never refused because of someone else's failures.

A check is claimed before the password is verified (``claim``): in one transaction the counters
are created if missing, locked, read, and counted as failed. A success then undoes the claim
(``succeeded``: the pair's count is cleared, the address's claim taken back). So in a burst of
concurrent guesses exactly the limit's worth of passwords is checked, whatever the workers.

Locking: the first statement of the claim is an ``INSERT ... ON CONFLICT DO NOTHING``. On
SQLite that first write statement takes the database's write lock for the whole transaction,
which serialises claims; on PostgreSQL the ``SELECT ... FOR UPDATE`` that follows locks the
row. Rows are always locked address first, then pair, so two claims cannot deadlock.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, select, tuple_, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from appliance.core.config import SecurityConfig
from appliance.core.db.models import LoginCounter
from appliance.core.db.session import Database

PAIR, ADDRESS = "pair", "address"
PURGE_EVERY_S = 60.0  # stale counters are deleted at most this often per process
_MAX_DOUBLINGS = 30  # keeps 2**n finite; lockout_s caps the back-off long before


@dataclass(frozen=True)
class ThrottlePolicy:
    """The limits (see the module docstring); ``from_config`` reads ``security.login_*``."""

    max_failures: int = 5
    window_s: float = 300.0
    backoff_s: float = 30.0
    lockout_s: float = 300.0
    address_max_failures: int = 50

    @classmethod
    def from_config(cls, security: SecurityConfig) -> ThrottlePolicy:
        return cls(
            max_failures=security.login_max_failures,
            window_s=security.login_window_s,
            backoff_s=security.login_backoff_s,
            lockout_s=security.login_lockout_s,
            address_max_failures=security.login_address_max_failures,
        )

    def backoff(self, failures: int, limit: int) -> float:
        """Seconds no password is checked after the latest of ``failures`` counted checks."""
        if failures < limit:
            return 0.0
        doublings = min(failures - limit, _MAX_DOUBLINGS)
        return min(self.backoff_s * 2**doublings, self.lockout_s)


def whole_seconds(retry_after: float) -> int:
    """A back-off as people and ``Retry-After`` say it: whole seconds, rounded up, at least 1."""
    return max(1, math.ceil(retry_after))


@dataclass(frozen=True)
class Claim:
    """The answer to ``LoginThrottle.claim``: whether the password may be checked now, and
    otherwise how many seconds until it may."""

    username: str
    address: str
    allowed: bool
    retry_after: float = 0.0


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)  # SQLite drops the zone


class LoginThrottle:
    """The shared, atomic login counters of one database."""

    def __init__(self, db: Database, policy: ThrottlePolicy | None = None) -> None:
        self.db = db
        self.policy = policy or ThrottlePolicy()
        self._insert = pg_insert if db.engine.dialect.name == "postgresql" else sqlite_insert
        self._purged_at = -PURGE_EVERY_S  # the first claim purges

    def _limit(self, scope: str) -> int:
        p = self.policy
        return p.max_failures if scope == PAIR else p.address_max_failures

    def _locked_row(self, s: Session, scope: str, address: str, username: str) -> LoginCounter:
        """The counter, created if missing and locked for this transaction."""
        key = {"scope": scope, "address": address, "username": username}
        created = datetime.now(UTC)
        s.execute(
            self._insert(LoginCounter)
            .values(**key, failures=0, last_at=created)
            .on_conflict_do_nothing(index_elements=["scope", "address", "username"])
        )
        return s.scalars(
            select(LoginCounter)
            .filter_by(**key)
            .with_for_update()
            .execution_options(populate_existing=True)
        ).one()

    def _wait(self, row: LoginCounter, now: datetime) -> float:
        """Seconds ``row`` still backs off (0: a check may be counted now); forgets the
        failures of a quiet window."""
        limit, last = self._limit(row.scope), _aware(row.last_at)
        held = self.policy.backoff(row.failures, limit)
        ends = last + timedelta(seconds=held)
        if row.failures and now >= ends + timedelta(seconds=self.policy.window_s):
            row.failures = 0
            return 0.0
        return max(0.0, (ends - now).total_seconds()) if held else 0.0

    def claim(self, username: str, address: str) -> Claim:
        """Count a password check of ``username`` from ``address`` as failed, if neither
        counter backs off; else refuse it (nothing is counted) with the seconds to wait."""
        username, address = username[:64], address[:64]
        self._maybe_purge()
        with self.db.session() as s:
            by_address = self._locked_row(s, ADDRESS, address, "")
            now = datetime.now(UTC)  # after the wait for the lock
            wait = self._wait(by_address, now)
            if wait > 0:  # the pair's counter is not even created
                return Claim(username, address, False, wait)
            pair = self._locked_row(s, PAIR, address, username)
            wait = self._wait(pair, now)
            if wait > 0:
                return Claim(username, address, False, wait)
            for row in (by_address, pair):
                row.failures += 1
                row.last_at = now
        return Claim(username, address, True)

    def succeeded(self, claim: Claim) -> None:
        """The claimed check found the right password: clear the pair's count and take the
        claim back from the address's (its other failures still count)."""
        with self.db.session() as s:
            # the same lock order as ``claim``: the address first
            s.execute(
                update(LoginCounter)
                .where(
                    LoginCounter.scope == ADDRESS,
                    LoginCounter.address == claim.address,
                    LoginCounter.username == "",
                    LoginCounter.failures > 0,
                )
                .values(failures=LoginCounter.failures - 1)
            )
            s.execute(
                delete(LoginCounter).where(
                    LoginCounter.scope == PAIR,
                    LoginCounter.address == claim.address,
                    LoginCounter.username == claim.username,
                )
            )

    def _maybe_purge(self) -> None:
        if time.monotonic() - self._purged_at >= PURGE_EVERY_S:
            self._purged_at = time.monotonic()
            self.purge()

    def purge(self) -> int:
        """Delete counters idle for longer than any back-off and window, which hold nothing
        back any more (``claim`` calls this at most once every ``PURGE_EVERY_S`` per process);
        returns how many. Rows another transaction holds are skipped, so the purge never
        waits on a claim (and cannot deadlock with one)."""
        p = self.policy
        cutoff = datetime.now(UTC) - timedelta(seconds=p.window_s + p.lockout_s)
        pk = tuple_(LoginCounter.scope, LoginCounter.address, LoginCounter.username)
        with self.db.session() as s:
            stale = s.execute(
                select(LoginCounter.scope, LoginCounter.address, LoginCounter.username)
                .where(LoginCounter.last_at < cutoff)
                .limit(1000)
                .with_for_update(skip_locked=True)
            ).all()
            if not stale:
                return 0
            # only if still stale: a claim in between may have refreshed ``last_at``
            keys = [tuple(k) for k in stale]
            gone = s.execute(
                delete(LoginCounter).where(pk.in_(keys), LoginCounter.last_at < cutoff)
            )
            return gone.rowcount
