"""Accounts: login throttling from the audit log, audited logins and logouts, session
expiry, and per-user API keys stored only as hashes (real SQLite, no model)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import select

from appliance.core.auth.api_keys import ApiKeyError
from appliance.core.auth.service import AuthService, LoginThrottle
from appliance.core.db.models import ApiKey, AuditEvent
from appliance.core.db.session import Database


@pytest.fixture()
def db(tmp_path: Path):  # noqa: ANN201
    database = Database(f"sqlite:///{tmp_path / 'auth.db'}")
    database.migrate()
    yield database
    database.dispose()


def actions(db: Database, actor: str) -> list[str]:
    with db.session() as s:
        return list(
            s.scalars(
                select(AuditEvent.action).where(AuditEvent.actor == actor).order_by(AuditEvent.id)
            )
        )


def test_repeated_failures_lock_the_username_then_it_unlocks(db: Database) -> None:
    auth = AuthService(db, 1, LoginThrottle(max_failures=3, window_s=60, lockout_s=1.5))
    auth.create_user("kim", "right-password")
    auth.create_user("lee", "right-password")
    for _ in range(3):
        assert auth.login("kim", "wrong-password") is None
    assert auth.locked_for("kim") > 0
    # locked: even the right password is refused, and the attempt is audited as such
    assert auth.login("kim", "right-password") is None
    assert actions(db, "kim") == ["login.failed"] * 3 + ["login.locked"]
    assert auth.locked_for("lee") == 0  # the lock is per username
    assert auth.login("lee", "right-password") is not None
    time.sleep(1.6)
    assert auth.locked_for("kim") == 0
    token, who = auth.login("kim", "right-password")
    assert who.username == "kim" and actions(db, "kim")[-1] == "login.ok"
    # a success resets the count: one more failure does not lock again
    assert auth.login("kim", "wrong-password") is None
    assert auth.locked_for("kim") == 0
    auth.logout(token)
    assert auth.resolve(token) is None and actions(db, "kim")[-1] == "logout"


def test_sessions_expire(db: Database) -> None:
    auth = AuthService(db, session_ttl_hours=0.5 / 3600)  # half a second
    auth.create_user("park", "right-password")
    token, who = auth.login("park", "right-password")
    assert auth.resolve(token) == who
    time.sleep(0.7)
    assert auth.resolve(token) is None


def test_api_keys_are_hashed_listed_and_revocable_per_user(db: Database) -> None:
    auth = AuthService(db, 1)
    choi = auth.create_user("choi", "right-password")
    jung = auth.create_user("jung", "right-password")
    key, info = auth.api_keys.create(choi, "notebook")
    assert key.startswith("sk-") and info.prefix == key[:10] and not info.revoked
    with db.session() as s:
        stored = s.scalar(select(ApiKey).where(ApiKey.id == info.id))
        assert key not in (stored.key_hash, stored.prefix) and len(stored.key_hash) == 64
    assert auth.api_keys.resolve(key) == choi
    assert auth.api_keys.list(choi)[0].last_used_at is not None
    assert auth.api_keys.list(jung) == []
    with pytest.raises(ApiKeyError):
        auth.api_keys.revoke(jung, info.id)  # someone else's key reads as missing
    assert auth.api_keys.resolve(key) == choi
    auth.api_keys.revoke(choi, info.id)
    assert auth.api_keys.resolve(key) is None
    assert auth.api_keys.resolve("sk-not-a-key") is None
    assert auth.api_keys.list(choi)[0].revoked
    assert actions(db, "choi") == ["api_key.create", "api_key.revoke"]
    with pytest.raises(ApiKeyError):
        auth.api_keys.create(choi, "  ")
