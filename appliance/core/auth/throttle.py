"""Login (and API-key) throttling counted in the database, so that every worker shares one
count.

Counters (``LoginCounter`` rows, by ``scope``):

- ``pair``: failed password checks of one (username, client address). At ``max_failures`` the
  pair backs off: no password of that user from that address is checked for ``backoff_s``
  after the latest counted check, twice that after the next one, and so on up to
  ``lockout_s``. The right password from another address is never refused because of it.
- ``address``: failed checks from one address, whatever the usernames (password spraying). At
  ``address_max_failures`` it backs off the same way, but only for pairs the address does not
  know: a pair is *known* (a ``known`` row) for ``known_s`` after its last successful check.
  So when many people share one address (everyone behind a proxy that is not in
  ``security.trusted_proxies``), a sprayer there cannot lock out the users who signed in from
  it before; only their own pair counters hold them back. What it costs: a user signing in
  from that address for the first time waits out the back-off like the sprayer, and during a
  back-off the sprayer can tell (by a checked answer instead of a refusal) which usernames
  signed in from that address lately. Checking unknown pairs anyway would let the right
  password in, but then the address counter would limit nothing: a sprayer tries each
  username once.
- ``api_key``: invalid API keys from one address (``claim_key``): at ``max_failures`` it backs
  off the same way, and ``appliance.core.auth.api_keys`` refuses the invalid keys from there
  with the time to wait (valid keys are never held back).

Failures are forgotten once ``window_s`` has passed without one (counted from the end of any
back-off).

A check is claimed before the password is verified (``claim``): in one transaction the counters
are created if missing, locked, read, and counted as failed. A success then undoes the claim
(``succeeded``): the pair's count is cleared, the address's claim taken back *with its time*
(the counter's ``last_at`` goes back to what it was, when no other check was counted since),
and the pair becomes known. So a success never re-arms or prolongs a back-off or a window, and
in a burst of concurrent guesses exactly the limit's worth of passwords is checked, whatever the
workers.

Locking: the first statement of the claim is an ``INSERT ... ON CONFLICT DO NOTHING``. On
SQLite that first write statement takes the database's write lock for the whole transaction,
which serialises claims; on PostgreSQL the ``SELECT ... FOR UPDATE`` that follows locks the
row. Rows are always locked address first, then pair, then known, so two claims cannot
deadlock. Times come from ``clock`` (UTC now; tests pass their own).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import and_, delete, or_, select, tuple_
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from appliance.core.config import SecurityConfig
from appliance.core.db.models import LoginCounter
from appliance.core.db.session import Database

PAIR, ADDRESS, KNOWN, KEY = "pair", "address", "known", "api_key"
PURGE_EVERY_S = 60.0  # stale counters are deleted at most this often per process
_MAX_DOUBLINGS = 30  # keeps 2**n finite; lockout_s caps the back-off long before
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class ThrottlePolicy:
    """The limits (see the module docstring); ``from_config`` reads ``security.login_*``."""

    max_failures: int = 5
    window_s: float = 300.0
    backoff_s: float = 30.0
    lockout_s: float = 300.0
    address_max_failures: int = 50
    known_s: float = 30 * 86400.0  # a success keeps its pair known this long

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
    otherwise how many seconds until it may. An allowed claim carries when it was counted and
    the address counter's time before, which ``succeeded`` puts back."""

    username: str
    address: str
    allowed: bool
    retry_after: float = 0.0
    at: datetime | None = None
    address_was: datetime | None = None


def aware_utc(at: datetime) -> datetime:
    """``at`` with its UTC zone (SQLite returns stored times without one)."""
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)  # SQLite drops the zone


class LoginThrottle:
    """The shared, atomic login counters of one database."""

    def __init__(
        self, db: Database, policy: ThrottlePolicy | None = None, clock: Clock = utc_now
    ) -> None:
        self.db = db
        self.policy = policy or ThrottlePolicy()
        self.clock = clock
        self._insert = pg_insert if db.engine.dialect.name == "postgresql" else sqlite_insert
        self._purged_at = -PURGE_EVERY_S  # the first claim purges

    def _limit(self, scope: str) -> int:
        p = self.policy
        return p.address_max_failures if scope == ADDRESS else p.max_failures

    def _locked_row(self, s: Session, scope: str, address: str, username: str) -> LoginCounter:
        """The counter, created if missing and locked for this transaction."""
        key = {"scope": scope, "address": address, "username": username}
        s.execute(
            self._insert(LoginCounter)
            .values(**key, failures=0, last_at=self.clock())
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
        limit, last = self._limit(row.scope), aware_utc(row.last_at)
        held = self.policy.backoff(row.failures, limit)
        ends = last + timedelta(seconds=held)
        if row.failures and now >= ends + timedelta(seconds=self.policy.window_s):
            row.failures = 0
            return 0.0
        return max(0.0, (ends - now).total_seconds()) if held else 0.0

    def _known(self, s: Session, address: str, username: str, now: datetime) -> bool:
        """Whether ``username`` signed in from ``address`` within ``known_s``."""
        row = s.get(LoginCounter, (KNOWN, address, username))
        return row is not None and now - aware_utc(row.last_at) <= timedelta(
            seconds=self.policy.known_s
        )

    def claim(self, username: str, address: str) -> Claim:
        """Count a password check of ``username`` from ``address`` as failed, unless the pair
        backs off, or the address does and does not know the pair; else refuse it (nothing is
        counted) with the seconds to wait."""
        username, address = username[:64], address[:64]
        self._maybe_purge()
        with self.db.session() as s:
            by_address = self._locked_row(s, ADDRESS, address, "")
            now = self.clock()  # after the wait for the lock
            wait = self._wait(by_address, now)
            if wait > 0 and not self._known(s, address, username, now):
                return Claim(username, address, False, wait)  # no pair counter is created
            pair = self._locked_row(s, PAIR, address, username)
            wait = self._wait(pair, now)
            if wait > 0:
                return Claim(username, address, False, wait)
            address_was = aware_utc(by_address.last_at)
            for row in (by_address, pair):
                row.failures += 1
                row.last_at = now
        return Claim(username, address, True, at=now, address_was=address_was)

    def succeeded(self, claim: Claim) -> None:
        """The claimed check found the right password: clear the pair's count, take the claim
        back from the address's (its other failures still count) without re-arming it, and
        remember the pair as known."""
        with self.db.session() as s:
            # the same lock order as ``claim``: the address first
            by_address = s.scalars(
                select(LoginCounter)
                .filter_by(scope=ADDRESS, address=claim.address, username="")
                .with_for_update()
            ).one_or_none()
            if by_address is not None and by_address.failures > 0:
                by_address.failures -= 1
                # nothing counted since this claim: as if it never was (no new back-off, no
                # new window); else a later check's time stands
                if claim.at is not None and aware_utc(by_address.last_at) == claim.at:
                    by_address.last_at = claim.address_was or by_address.last_at
            s.execute(
                delete(LoginCounter).where(
                    LoginCounter.scope == PAIR,
                    LoginCounter.address == claim.address,
                    LoginCounter.username == claim.username,
                )
            )
            known = self._locked_row(s, KNOWN, claim.address, claim.username)
            known.last_at = self.clock()

    def claim_key(self, address: str) -> Claim:
        """Count an invalid API key from ``address``, unless that address's ``api_key``
        counter backs off; else refuse (nothing counted) with the seconds to wait."""
        address = address[:64]
        self._maybe_purge()
        with self.db.session() as s:
            row = self._locked_row(s, KEY, address, "")
            now = self.clock()
            wait = self._wait(row, now)
            if wait > 0:
                return Claim("", address, False, wait)
            row.failures += 1
            row.last_at = now
        return Claim("", address, True, at=now)

    def _maybe_purge(self) -> None:
        if time.monotonic() - self._purged_at >= PURGE_EVERY_S:
            self._purged_at = time.monotonic()
            self.purge()

    def purge(self) -> int:
        """Delete counters idle for longer than any back-off and window, and known pairs not
        seen for ``known_s``, which hold nothing back any more (``claim`` calls this at most
        once every ``PURGE_EVERY_S`` per process); returns how many. Rows another transaction
        holds are skipped, so the purge never waits on a claim (and cannot deadlock with one)."""
        p = self.policy
        now = self.clock()
        cutoff = now - timedelta(seconds=p.window_s + p.lockout_s)
        known_cutoff = now - timedelta(seconds=p.known_s)
        stale_now = or_(
            and_(LoginCounter.scope != KNOWN, LoginCounter.last_at < cutoff),
            and_(LoginCounter.scope == KNOWN, LoginCounter.last_at < known_cutoff),
        )
        pk = tuple_(LoginCounter.scope, LoginCounter.address, LoginCounter.username)
        with self.db.session() as s:
            stale = s.execute(
                select(LoginCounter.scope, LoginCounter.address, LoginCounter.username)
                .where(stale_now)
                .limit(1000)
                .with_for_update(skip_locked=True)
            ).all()
            if not stale:
                return 0
            # only if still stale: a claim in between may have refreshed ``last_at``
            keys = [tuple(k) for k in stale]
            gone = s.execute(delete(LoginCounter).where(pk.in_(keys), stale_now))
            return gone.rowcount
