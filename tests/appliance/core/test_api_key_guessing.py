"""API keys on both databases: invalid keys are counted per client address, audited, and
refused with the time to wait once an address sent too many (valid keys never are); and
disabling a user revokes their keys, so re-enabling them brings none back."""

from __future__ import annotations

from sqlalchemy import select

from appliance.core.auth.service import AuthService
from appliance.core.auth.throttle import ThrottlePolicy
from appliance.core.db.models import AuditEvent
from appliance.core.db.session import Database
from appliance.core.services.admin.users import AdminUsers


def _events(db: Database, action: str) -> list[dict]:
    with db.session() as s:
        query = select(AuditEvent.detail).where(AuditEvent.action == action)
        return list(s.scalars(query.order_by(AuditEvent.id)))


def test_wrong_keys_are_audited_and_back_off_per_address(db: Database) -> None:
    auth = AuthService(db, 1, ThrottlePolicy(max_failures=3, backoff_s=30))
    kim = auth.create_user("kim", "password-123")
    key, _ = auth.api_keys.create(kim, "laptop")
    checks = [auth.api_keys.authenticate(f"sk-guess{i}", "10.0.0.5") for i in range(8)]
    assert all(c.principal is None for c in checks)
    assert [c.retry_after > 0 for c in checks] == [False] * 3 + [True] * 5
    # audited while counted, not while refused: an address cannot fill the audit log
    assert _events(db, "login.api_key.failed") == [
        {"client": "10.0.0.5", "prefix": f"sk-guess{i}"} for i in range(3)
    ]
    # the owner of a valid key is never held back, from that address or any other
    assert auth.api_keys.authenticate(key, "10.0.0.5").principal.username == "kim"
    assert auth.api_keys.authenticate("sk-other", "10.0.0.6").retry_after == 0
    # a session token sent as a key is audited without any of its characters
    token = auth.login("kim", "password-123", "10.0.0.7").token
    assert auth.api_keys.authenticate(token, "10.0.0.7").principal is None
    assert _events(db, "login.api_key.failed")[-1] == {"client": "10.0.0.7", "prefix": ""}


def test_disabling_a_user_revokes_their_keys_for_good(db: Database) -> None:
    auth = AuthService(db, 1)
    users = AdminUsers(auth)
    auth.create_user("boss", "password-123", role="admin")
    dana = auth.create_user("dana", "password-123")
    old, _ = auth.api_keys.create(dana, "old")
    assert auth.api_keys.resolve(old) is not None
    users.set_disabled("boss", "dana", True)
    assert auth.api_keys.resolve(old) is None
    users.set_disabled("boss", "dana", False)
    assert auth.api_keys.resolve(old) is None  # before: the old key worked again
    assert all(k.revoked for k in auth.api_keys.list(dana))
    assert _events(db, "admin.user.disable") == [{"username": "dana", "api_keys_revoked": 1}]
    new, _ = auth.api_keys.create(dana, "new")
    assert auth.api_keys.resolve(new).username == "dana"
    users.set_role("boss", "dana", "admin")  # other changes to the user revoke nothing
    assert auth.api_keys.resolve(new) is not None
