"""Accounts and login sessions: Argon2-hashed passwords, hashed bearer tokens with expiry."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import delete, select

from appliance.db.models import AuditEvent, AuthSession, User, UserCollection
from appliance.db.session import Database

ROLES = ("staff", "admin")
_hasher = PasswordHasher()


class AuthError(ValueError):
    pass


DEFAULT_COLLECTIONS = frozenset({"default"})


@dataclass(frozen=True)
class Principal:
    """Who is making a request, and which document collections they may retrieve from."""

    user_id: int
    username: str
    role: str
    collections: frozenset[str] = DEFAULT_COLLECTIONS

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def allowed_collections(self) -> frozenset[str] | None:
        """None means every collection (admins)."""
        return None if self.is_admin else self.collections


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


class AuthService:
    def __init__(self, db: Database, session_ttl_hours: float) -> None:
        self.db = db
        self.ttl = timedelta(hours=session_ttl_hours)

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

    def authenticate(self, username: str, password: str) -> Principal | None:
        with self.db.session() as s:
            user = s.scalar(select(User).where(User.username == username))
            ok = (
                user is not None
                and not user.disabled
                and verify_password(user.password_hash, password)
            )
            s.add(
                AuditEvent(
                    actor=username[:64], action="login" if ok else "login.failed", detail=None
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
            expires = sess.expires_at
            if expires.tzinfo is None:  # SQLite drops the zone; we always store UTC
                expires = expires.replace(tzinfo=UTC)
            if expires < datetime.now(UTC) or user.disabled:
                return None
            return _principal(s, user)

    def principal_for(self, username: str) -> Principal | None:
        with self.db.session() as s:
            user = s.scalar(select(User).where(User.username == username))
            if user is None or user.disabled:
                return None
            return _principal(s, user)

    def logout(self, token: str) -> None:
        with self.db.session() as s:
            s.execute(delete(AuthSession).where(AuthSession.token_hash == _token_hash(token)))
