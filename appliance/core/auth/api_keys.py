"""Per-user API keys for the OpenAI-compatible API (``Authorization: Bearer sk-...``).

A key is shown once, when it is created; only its SHA-256 and a short prefix (to tell keys
apart in a list) are stored. A revoked key stops working at once, and disabling a user revokes
their live keys (``AdminUsers.set_disabled``), so re-enabling the user brings none back.

Invalid keys (``authenticate``: a bearer token that is no live key of an enabled user) are
counted per client address (``LoginThrottle.claim_key``) and audited as
``login.api_key.failed``. A key is 256 random bits, so online guessing is hopeless whatever
the rate; the count is there to bound the audit rows and to tell a client that keeps sending
a dead key to stop: after ``login_max_failures`` invalid keys from one address, further
invalid keys from it are answered with the seconds to wait (429 and ``Retry-After``) and not
audited, until the back-off ends. A valid key is always looked up first and accepted, so a
shared address (everyone behind one proxy) never locks out the holders of valid keys.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select, update

from appliance.core.auth.principal import Principal
from appliance.core.auth.throttle import LoginThrottle
from appliance.core.db.models import ApiKey, AuditEvent, User
from appliance.core.db.session import Database
from appliance.core.text import escaped_controls

KEY_PREFIX = "sk-"


class ApiKeyError(ValueError):
    pass


@dataclass(frozen=True)
class ApiKeyInfo:
    id: int
    name: str
    prefix: str
    created_at: str
    last_used_at: str | None
    revoked: bool


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _info(row: ApiKey) -> ApiKeyInfo:
    return ApiKeyInfo(
        row.id,
        row.name,
        row.prefix,
        row.created_at.isoformat(),
        row.last_used_at.isoformat() if row.last_used_at else None,
        row.revoked_at is not None,
    )


@dataclass(frozen=True)
class KeyCheck:
    """The answer to ``ApiKeyStore.authenticate``: the key's owner, or None; with
    ``retry_after`` > 0 when its address sent too many invalid keys lately."""

    principal: Principal | None
    retry_after: float = 0.0


class ApiKeyStore:
    """Create, list, revoke and resolve API keys; every change is audited. With ``throttle``,
    ``authenticate`` counts invalid keys per client address."""

    def __init__(
        self,
        db: Database,
        principal_by_id: Callable[[int], Principal | None],
        throttle: LoginThrottle | None = None,
    ) -> None:
        self.db = db
        self._principal_by_id = principal_by_id
        self.throttle = throttle or LoginThrottle(db)

    def create(self, principal: Principal, name: str) -> tuple[str, ApiKeyInfo]:
        """A new key for ``principal``: (the key, shown only now; its stored description)."""
        name = name.strip()
        if not name or len(name) > 100:
            raise ApiKeyError("give the key a name of 1-100 characters")
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        with self.db.session() as s:
            row = ApiKey(user_id=principal.user_id, name=name, key_hash=_hash(key), prefix=key[:10])
            s.add(row)
            s.add(
                AuditEvent(actor=principal.username, action="api_key.create", detail={"name": name})
            )
            s.flush()
            return key, _info(row)

    def list(self, principal: Principal) -> list[ApiKeyInfo]:
        with self.db.session() as s:
            rows = s.scalars(
                select(ApiKey).where(ApiKey.user_id == principal.user_id).order_by(ApiKey.id)
            )
            return [_info(r) for r in rows]

    def revoke(self, principal: Principal, key_id: int) -> None:
        """Revoke one of ``principal``'s own keys (someone else's id reads as missing)."""
        with self.db.session() as s:
            row = s.get(ApiKey, key_id)
            if row is None or row.user_id != principal.user_id:
                raise ApiKeyError(f"API key {key_id} not found")
            if row.revoked_at is None:
                row.revoked_at = datetime.now(UTC)
                s.add(
                    AuditEvent(
                        actor=principal.username,
                        action="api_key.revoke",
                        detail={"name": row.name, "prefix": row.prefix},
                    )
                )

    def resolve(self, key: str) -> Principal | None:
        """The enabled owner of a live key, or None; records when the key was last used."""
        if not key.startswith(KEY_PREFIX):
            return None
        with self.db.session() as s:
            row = s.scalar(select(ApiKey).where(ApiKey.key_hash == _hash(key)))
            if row is None or row.revoked_at is not None:
                return None
            user_id = row.user_id
            s.execute(
                update(ApiKey).where(ApiKey.id == row.id).values(last_used_at=datetime.now(UTC))
            )
            if s.get(User, user_id) is None:
                return None
        return self._principal_by_id(user_id)

    def authenticate(self, key: str, client: str = "") -> KeyCheck:
        """The owner of a live key from ``client``; else the key is counted as invalid from
        that address and audited, or, when that address backs off, refused unaudited with
        the seconds to wait (see the module docstring)."""
        principal = self.resolve(key)
        if principal is not None:
            return KeyCheck(principal)
        claim = self.throttle.claim_key(client)
        if not claim.allowed:
            return KeyCheck(None, claim.retry_after)
        # the prefix as keys are listed (not of a session token sent here by mistake)
        prefix = escaped_controls(key[:10]) if key.startswith(KEY_PREFIX) else ""
        detail = {"client": client, "prefix": prefix}
        with self.db.session() as s:
            s.add(AuditEvent(actor="(api key)", action="login.api_key.failed", detail=detail))
        return KeyCheck(None)
