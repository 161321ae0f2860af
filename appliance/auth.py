"""Accounts and login sessions: Argon2-hashed passwords, hashed bearer tokens with expiry."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import delete, select

from appliance.db.models import AuditEvent, AuthSession, User
from appliance.db.session import Database

ROLES = ("staff", "admin")
_hasher = PasswordHasher()


class AuthError(ValueError):
    pass


@dataclass(frozen=True)
class Principal:
    """Who is making a request."""

    user_id: int
    username: str
    role: str

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


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


class AuthService:
    def __init__(self, db: Database, session_ttl_hours: float) -> None:
        self.db = db
        self.ttl = timedelta(hours=session_ttl_hours)

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
            return Principal(user.id, user.username, user.role)

    def has_admin(self) -> bool:
        with self.db.session() as s:
            return s.scalar(select(User.id).where(User.role == "admin").limit(1)) is not None

    def list_users(self) -> list[Principal]:
        with self.db.session() as s:
            return [Principal(u.id, u.username, u.role) for u in s.scalars(select(User))]

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
            return Principal(user.id, user.username, user.role) if ok and user else None

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
            return Principal(user.id, user.username, user.role)

    def principal_for(self, username: str) -> Principal | None:
        with self.db.session() as s:
            user = s.scalar(select(User).where(User.username == username))
            if user is None or user.disabled:
                return None
            return Principal(user.id, user.username, user.role)

    def logout(self, token: str) -> None:
        with self.db.session() as s:
            s.execute(delete(AuthSession).where(AuthSession.token_hash == _token_hash(token)))
