"""Accounts: login throttling per username and address, audited logins and logouts, one's own
password change, session expiry, and per-user API keys stored only as hashes (real SQLite, no
model)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import select

from appliance.core.auth.api_keys import ApiKeyError
from appliance.core.auth.service import (
    AuthError,
    AuthService,
    PasswordChange,
    PasswordThrottled,
    WrongPassword,
)
from appliance.core.auth.throttle import ThrottlePolicy
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


def test_failures_back_off_one_username_from_one_address(db: Database) -> None:
    policy = ThrottlePolicy(max_failures=3, window_s=60, backoff_s=2.0, lockout_s=2.0)
    auth = AuthService(db, 1, policy)
    auth.create_user("kim", "right-password")
    auth.create_user("lee", "right-password")
    for _ in range(3):
        assert auth.login("kim", "wrong-password", "10.0.0.1").token is None
    # backing off: even the right password is refused unchecked, and audited as such
    refused = auth.login("kim", "right-password", "10.0.0.1")
    # (an Argon2 check takes up to a second on a busy machine: the wait is what is left)
    assert refused.token is None and 0 < refused.retry_after <= 2.0
    assert actions(db, "kim") == ["login.failed"] * 3 + ["login.locked"]
    assert auth.login("kim", "right-password", "10.0.0.2").ok  # kim from elsewhere gets in
    assert auth.login("lee", "right-password", "10.0.0.1").ok  # and others from there
    time.sleep(refused.retry_after + 0.1)
    result = auth.login("kim", "right-password", "10.0.0.1")
    assert result.principal.username == "kim" and actions(db, "kim")[-1] == "login.ok"
    # a success resets the count: one more failure does not back off again
    assert not auth.login("kim", "wrong-password", "10.0.0.1").ok
    assert auth.login("kim", "right-password", "10.0.0.1").ok
    with db.session() as s:
        logged = s.scalar(select(AuditEvent.detail).where(AuditEvent.action == "login.ok"))
    assert logged == {"client": "10.0.0.2"}  # the audit log says where from
    auth.logout(result.token)
    assert auth.resolve(result.token) is None and actions(db, "kim")[-1] == "logout"


def test_own_password_change_keeps_api_keys_and_this_session(db: Database) -> None:
    auth = AuthService(db, 1, ThrottlePolicy(max_failures=2))
    han = auth.create_user("han", "right-password")
    key, _info = auth.api_keys.create(han, "notebook")
    here, there = auth.login("han", "right-password").token, auth.login("han", "right-password")
    with pytest.raises(WrongPassword):
        auth.change_password(here, "wrong-password", "new-password-1", "10.0.0.1")
    with pytest.raises(AuthError, match="at least 8"):
        auth.change_password(here, "right-password", "short", "10.0.0.1")
    change = auth.change_password(here, "right-password", "new-password-1", "10.0.0.1")
    assert change == PasswordChange(sessions_ended=1, api_keys_revoked=0)
    assert auth.resolve(here) == han and auth.resolve(there.token) is None
    assert auth.api_keys.resolve(key) == han
    assert auth.login("han", "new-password-1").ok and not auth.login("han", "right-password").ok
    assert "user.password" in actions(db, "han") and "user.password.failed" in actions(db, "han")
    # wrong current passwords count like failed logins of that user from that address
    with pytest.raises(WrongPassword):
        auth.change_password(here, "wrong-password", "new-password-2", "10.0.0.1")
    with pytest.raises(WrongPassword):
        auth.change_password(here, "wrong-password", "new-password-2", "10.0.0.1")
    with pytest.raises(PasswordThrottled):
        auth.change_password(here, "new-password-1", "new-password-2", "10.0.0.1")


def test_sessions_expire(db: Database) -> None:
    auth = AuthService(db, session_ttl_hours=0.5 / 3600)  # half a second
    auth.create_user("park", "right-password")
    result = auth.login("park", "right-password")
    token, who = result.token, result.principal
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


def test_names_with_control_characters_name_no_account(db_url: str) -> None:
    """A username with NUL (which PostgreSQL cannot even compare: it was a 500 there) or over
    64 characters is a failed login, counted and audited under its escaped form; no account
    can be created with one."""
    database = Database(db_url)
    database.migrate()
    auth = AuthService(database, 1)
    try:
        auth.create_user("nul", "password-123")
        for name in ("nul\x00", "n\x00ul", "x" * 200):
            result = auth.login(name, "password-123", client="10.0.0.1")
            assert not result.ok and result.retry_after == 0
        assert actions(database, "nul\\x00") == ["login.failed"]
        for bad in ("a\x00b", "tab\tname", "x" * 65):
            with pytest.raises(AuthError, match="1-64 characters"):
                auth.create_user(bad, "password-123")
    finally:
        database.dispose()
