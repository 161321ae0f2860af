"""Per-user API keys for the OpenAI-compatible API (``Authorization: Bearer sk-...``).

A key is shown once, when it is created; only its SHA-256 and a short prefix (to tell keys
apart in a list) are stored. A revoked key stops working at once.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select, update

from appliance.core.auth.principal import Principal
from appliance.core.db.models import ApiKey, AuditEvent, User
from appliance.core.db.session import Database

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


class ApiKeyStore:
    """Create, list, revoke and resolve API keys; every change is audited."""

    def __init__(self, db: Database, principal_by_id: Callable[[int], Principal | None]) -> None:
        self.db = db
        self._principal_by_id = principal_by_id

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
