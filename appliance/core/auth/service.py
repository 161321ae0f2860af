"""Accounts and login sessions: Argon2-hashed passwords, hashed bearer tokens with expiry,
login throttling (per username, from the audit log) and per-user API keys (``api_keys``)."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import delete, select

from appliance.core.auth.api_keys import ApiKeyStore
from appliance.core.auth.principal import DEFAULT_COLLECTIONS, ROLES, Principal
from appliance.core.db.models import AuditEvent, AuthSession, User, UserCollection
from appliance.core.db.session import Database

_hasher = PasswordHasher()


class AuthError(ValueError):
    pass


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def generate_password() -> str:
    return secrets.token_urlsafe(12)


def _principal(s, user: User) -> Principal:  # noqa: ANN001
    granted = frozenset(
        s.scalars(select(UserCollection.collection).where(UserCollection.user_id == user.id))
    )
    return Principal(user.id, user.username, user.role, granted or DEFAULT_COLLECTIONS)


@dataclass(frozen=True)
class LoginThrottle:
    """After ``max_failures`` failed logins for one username within ``window_s``, that
    username is locked for ``lockout_s`` seconds from the last failure (a success resets)."""

    max_failures: int = 5
    window_s: float = 300.0
    lockout_s: float = 300.0


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)  # SQLite drops the zone


class AuthService:
    def __init__(
        self, db: Database, session_ttl_hours: float, throttle: LoginThrottle | None = None
    ) -> None:
        self.db = db
        self.ttl = timedelta(hours=session_ttl_hours)
        self.throttle = throttle or LoginThrottle()
        self.api_keys = ApiKeyStore(db, self.principal_by_id)

    def set_collections(self, username: str, collections: list[str]) -> Principal:
        """Replace the collections a user may retrieve from."""
        names = sorted({c.strip() for c in collections if c.strip()})
        if not names or any(len(c) > 64 for c in names):
            raise AuthError("give one or more collection names (at most 64 characters each)")
        with self.db.session() as s:
            user = s.scalar(select(User).where(User.username == username))
            if user is None:
                raise AuthError(f"no user {username!r}")
            s.execute(delete(UserCollection).where(UserCollection.user_id == user.id))
            s.add_all(UserCollection(user_id=user.id, collection=c) for c in names)
            s.add(
                AuditEvent(
                    actor="system",
                    action="user.collections",
                    detail={"username": username, "collections": names},
                )
            )
            s.flush()
            return _principal(s, user)

    def create_user(self, username: str, password: str, role: str = "staff") -> Principal:
        username = username.strip()
        if not username or len(username) > 64:
            raise AuthError("username must be 1-64 characters")
        if role not in ROLES:
            raise AuthError(f"role must be one of {', '.join(ROLES)}")
        if len(password) < 8:
            raise AuthError("password must be at least 8 characters")
        with self.db.session() as s:
            if s.scalar(select(User).where(User.username == username)):
                raise AuthError(f"user {username!r} already exists")
            user = User(username=username, password_hash=hash_password(password), role=role)
            s.add(user)
            s.flush()
            s.add(AuditEvent(actor="system", action="user.create", detail={"username": username}))
            return _principal(s, user)

    def has_admin(self) -> bool:
        with self.db.session() as s:
            return s.scalar(select(User.id).where(User.role == "admin").limit(1)) is not None

    def list_users(self) -> list[Principal]:
        with self.db.session() as s:
            return [_principal(s, u) for u in s.scalars(select(User))]

    def set_password(self, username: str, password: str) -> None:
        if len(password) < 8:
            raise AuthError("password must be at least 8 characters")
        with self.db.session() as s:
            user = s.scalar(select(User).where(User.username == username))
            if user is None:
                raise AuthError(f"no user {username!r}")
            user.password_hash = hash_password(password)
            s.execute(delete(AuthSession).where(AuthSession.user_id == user.id))

    def locked_for(self, username: str) -> float:
        """Seconds until ``username`` may try to log in again (0 when it is not locked).

        Read from the audit log, so a lock holds across restarts and across workers."""
        t = self.throttle
        now = datetime.now(UTC)
        with self.db.session() as s:
            rows = s.execute(
                select(AuditEvent.action, AuditEvent.at)
                .where(
                    AuditEvent.actor == username[:64],
                    AuditEvent.action.in_(("login.ok", "login.failed")),
                    AuditEvent.at >= now - timedelta(seconds=t.window_s),
                )
                .order_by(AuditEvent.id.desc())
                .limit(t.max_failures)
            ).all()
        failures = [_aware(at) for action, at in rows if action == "login.failed"]
        if len(failures) < t.max_failures or len(rows) > len(failures):
            return 0.0  # fewer than K failures in the window, or a success among the last K
        left = t.lockout_s - (now - failures[0]).total_seconds()
        return max(0.0, left)

    def authenticate(self, username: str, password: str) -> Principal | None:
        """The principal for valid credentials, else None. Every attempt is audited
        (``login.ok``, ``login.failed``, or ``login.locked`` while throttled; a locked
        username's password is not even checked)."""
        if self.locked_for(username) > 0:
            with self.db.session() as s:
                s.add(AuditEvent(actor=username[:64], action="login.locked", detail=None))
            return None
        with self.db.session() as s:
            user = s.scalar(select(User).where(User.username == username))
            ok = (
                user is not None
                and not user.disabled
                and verify_password(user.password_hash, password)
            )
            s.add(
                AuditEvent(
                    actor=username[:64], action="login.ok" if ok else "login.failed", detail=None
                )
            )
            return _principal(s, user) if ok and user else None

    def login(self, username: str, password: str) -> tuple[str, Principal] | None:
        """A new bearer token for valid credentials (only its hash is stored)."""
        principal = self.authenticate(username, password)
        if principal is None:
            return None
        token = secrets.token_urlsafe(32)
        with self.db.session() as s:
            s.add(
                AuthSession(
                    token_hash=_token_hash(token),
                    user_id=principal.user_id,
                    expires_at=datetime.now(UTC) + self.ttl,
                )
            )
        return token, principal

    def resolve(self, token: str) -> Principal | None:
        with self.db.session() as s:
            row = s.execute(
                select(AuthSession, User)
                .join(User, User.id == AuthSession.user_id)
                .where(AuthSession.token_hash == _token_hash(token))
            ).first()
            if row is None:
                return None
            sess, user = row
            if _aware(sess.expires_at) < datetime.now(UTC) or user.disabled:
                return None
            return _principal(s, user)

    def principal_by_id(self, user_id: int) -> Principal | None:
        with self.db.session() as s:
            user = s.get(User, user_id)
            if user is None or user.disabled:
                return None
            return _principal(s, user)

    def principal_for(self, username: str) -> Principal | None:
        with self.db.session() as s:
            user = s.scalar(select(User).where(User.username == username))
            if user is None or user.disabled:
                return None
            return _principal(s, user)

    def logout(self, token: str) -> None:
        """End a session (its token stops working at once); audited as ``logout``."""
        with self.db.session() as s:
            row = s.execute(
                select(AuthSession.id, User.username)
                .join(User, User.id == AuthSession.user_id)
                .where(AuthSession.token_hash == _token_hash(token))
            ).first()
            if row is None:
                return
            s.execute(delete(AuthSession).where(AuthSession.id == row.id))
            s.add(AuditEvent(actor=row.username, action="logout", detail=None))
