"""Accounts and login sessions: Argon2-hashed passwords, hashed bearer tokens with expiry,
password changes, login throttling (``throttle``: per username and client address, counted in
the database) and per-user API keys (``api_keys``: invalid ones counted per client address by
the same throttle). The client address is the caller's (``client_address``)."""

from __future__ import annotations

import hashlib
import math
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import delete, select, update

from appliance.core.auth.api_keys import ApiKeyStore
from appliance.core.auth.directory_accounts import LOCAL
from appliance.core.auth.directory_signin import DirectorySignIn
from appliance.core.auth.principal import DEFAULT_COLLECTIONS, ROLES, Principal
from appliance.core.auth.throttle import LoginThrottle, ThrottlePolicy, aware_utc
from appliance.core.db.models import ApiKey, AuditEvent, AuthSession, User, UserCollection
from appliance.core.db.session import Database
from appliance.core.names import InvalidName, collection_name
from appliance.core.text import escaped_controls

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
class LoginResult:
    """One login attempt: the principal (and, from ``login``, its new session token) for the
    right password; else ``retry_after`` > 0 when the throttle refused to check it at all, or
    ``refused``, a reason safe to show, when the company directory refused or could not be
    asked (``directory_signin``)."""

    principal: Principal | None = None
    token: str | None = None
    retry_after: float = 0.0
    refused: str = ""

    @property
    def ok(self) -> bool:
        return self.principal is not None


@dataclass(frozen=True)
class PasswordChange:
    """What a password change ended besides the old password."""

    sessions_ended: int
    api_keys_revoked: int


class PasswordThrottled(AuthError):
    """Too many wrong current passwords: nothing was checked; try in ``retry_after`` s."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"too many failed attempts; try again in {math.ceil(retry_after)} s")
        self.retry_after = retry_after


class WrongPassword(AuthError):
    """The current password given for a password change is not the user's."""


def _login_event(username: str, action: str, client: str) -> AuditEvent:
    return AuditEvent(actor=username[:64], action=action, detail={"client": client})


def _collection_names(collections: list[str]) -> list[str]:
    """The collection names, checked (``appliance.core.names``), sorted, without repeats."""
    try:
        names = sorted({collection_name(c) for c in collections if c.strip()})
    except InvalidName as exc:
        raise AuthError(str(exc)) from exc
    if not names:
        raise AuthError("give one or more collection names (at most 64 characters each)")
    return names


def _check_new_password(password: str) -> None:
    if len(password) < 8:
        raise AuthError("password must be at least 8 characters")


class AuthService:
    """Accounts, sessions and passwords over one database; ``throttle`` sets the login
    back-off (``ThrottlePolicy.from_config(config.security)``; its defaults otherwise);
    ``directory`` adds LDAP and OIDC accounts (local accounts only without it)."""

    def __init__(
        self,
        db: Database,
        session_ttl_hours: float,
        throttle: ThrottlePolicy | None = None,
        directory: DirectorySignIn | None = None,
    ) -> None:
        self.db = db
        self.directory = directory
        self.ttl = timedelta(hours=session_ttl_hours)
        self.throttle = LoginThrottle(db, throttle)
        self.api_keys = ApiKeyStore(db, self.principal_by_id, self.throttle)
        # checked when there is no enabled user of that name, so that a wrong username takes
        # as long as a wrong password (the timing does not tell which usernames exist)
        self._dummy_hash = hash_password(secrets.token_urlsafe(16))

    def set_collections(self, username: str, collections: list[str]) -> Principal:
        """Replace the collections a user may retrieve from."""
        names = _collection_names(collections)
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

    def create_user(
        self,
        username: str,
        password: str,
        role: str = "staff",
        collections: list[str] | None = None,
    ) -> Principal:
        """Create an account, with its collections when given (else the default ones), in one
        transaction: a refused name or collection creates nothing."""
        username = username.strip()
        if not username or len(username) > 64 or escaped_controls(username) != username:
            raise AuthError("username must be 1-64 characters, none of them a control character")
        if role not in ROLES:
            raise AuthError(f"role must be one of {', '.join(ROLES)}")
        _check_new_password(password)
        names = _collection_names(collections) if collections else []
        with self.db.session() as s:
            if s.scalar(select(User).where(User.username == username)):
                raise AuthError(f"user {username!r} already exists")
            user = User(username=username, password_hash=hash_password(password), role=role)
            s.add(user)
            s.flush()
            s.add(AuditEvent(actor="system", action="user.create", detail={"username": username}))
            if names:
                s.add_all(UserCollection(user_id=user.id, collection=c) for c in names)
                detail = {"username": username, "collections": names}
                s.add(AuditEvent(actor="system", action="user.collections", detail=detail))
                s.flush()
            return _principal(s, user)

    def has_admin(self) -> bool:
        with self.db.session() as s:
            return s.scalar(select(User.id).where(User.role == "admin").limit(1)) is not None

    def list_users(self) -> list[Principal]:
        with self.db.session() as s:
            return [_principal(s, u) for u in s.scalars(select(User))]

    def set_password(self, username: str, password: str) -> PasswordChange:
        """An admin's reset: the new password, and every session and live API key of the user
        ends (whoever knew the old password may have made them)."""
        _check_new_password(password)
        with self.db.session() as s:
            user = s.scalar(select(User).where(User.username == username))
            if user is None:
                raise AuthError(f"no user {username!r}")
            if user.source != LOCAL:
                raise AuthError(f"{username!r} signs in through the company directory")
            user.password_hash = hash_password(password)
            ended = s.execute(delete(AuthSession).where(AuthSession.user_id == user.id))
            revoked = s.execute(
                update(ApiKey)
                .where(ApiKey.user_id == user.id, ApiKey.revoked_at.is_(None))
                .values(revoked_at=datetime.now(UTC))
            )
            return PasswordChange(ended.rowcount, revoked.rowcount)

    def change_password(
        self, token: str, current: str, new: str, client: str = ""
    ) -> PasswordChange:
        """The signed-in user of session ``token`` changes their own password: their API keys
        keep working, their other sessions end (this one stays). A wrong ``current`` counts
        as a failed login of the user from ``client`` (``PasswordThrottled`` once it backs
        off); audited as ``user.password`` or ``user.password.failed``."""
        principal = self.resolve(token)
        if principal is None:
            raise AuthError("your session has ended; sign in again")
        with self.db.session() as s:
            source = s.scalar(select(User.source).where(User.id == principal.user_id))
        if source != LOCAL:
            raise AuthError("your password is managed by the company directory; change it there")
        _check_new_password(new)
        if new == current:
            raise AuthError("the new password must differ from the current one")
        claim = self.throttle.claim(principal.username, client)
        if not claim.allowed:
            raise PasswordThrottled(claim.retry_after)
        with self.db.session() as s:
            user = s.get(User, principal.user_id)
            ok = user is not None and verify_password(user.password_hash, current)
            if not ok:
                s.add(_login_event(principal.username, "user.password.failed", client))
        if not ok:
            raise WrongPassword("the current password is wrong")
        self.throttle.succeeded(claim)
        with self.db.session() as s:
            s.execute(
                update(User)
                .where(User.id == principal.user_id)
                .values(password_hash=hash_password(new))
            )
            ended = s.execute(
                delete(AuthSession).where(
                    AuthSession.user_id == principal.user_id,
                    AuthSession.token_hash != _token_hash(token),
                )
            )
            detail = {"sessions_ended": ended.rowcount, "client": client}
            s.add(AuditEvent(actor=principal.username, action="user.password", detail=detail))
            return PasswordChange(ended.rowcount, 0)

    def _attempt(self, username: str, password: str, client: str) -> LoginResult:
        """Check a password unless the throttle refuses (``appliance.core.auth.throttle``);
        audited as ``login.ok``, ``login.failed`` or ``login.locked`` (not checked)."""
        # what the attempt is counted and audited as: a name with a control character (NUL,
        # which PostgreSQL cannot even compare) or over 64 characters names no account
        shown = escaped_controls(username)[:64]
        possible = shown == username
        claim = self.throttle.claim(shown, client)
        if not claim.allowed:
            with self.db.session() as s:
                s.add(_login_event(shown, "login.locked", client))
            return LoginResult(retry_after=claim.retry_after)
        if possible and self.directory is not None and self.directory.handles(username):
            outcome = self.directory.password(username, password, client)
            if outcome.principal is not None:
                self.throttle.succeeded(claim)
            return LoginResult(outcome.principal, refused=outcome.refused)
        with self.db.session() as s:
            user = s.scalar(select(User).where(User.username == username)) if possible else None
            if user is None or user.disabled or user.source != LOCAL:
                verify_password(self._dummy_hash, password)  # as long as a real check
                ok = False
            else:
                ok = verify_password(user.password_hash, password)
            s.add(_login_event(shown, "login.ok" if ok else "login.failed", client))
            principal = _principal(s, user) if ok and user else None
        if principal is not None:
            self.throttle.succeeded(claim)
        return LoginResult(principal)

    def authenticate(self, username: str, password: str, client: str = "") -> Principal | None:
        """The principal for valid credentials, else None (throttled like ``login``)."""
        return self._attempt(username, password, client).principal

    def login(self, username: str, password: str, client: str = "") -> LoginResult:
        """Log in from ``client`` (the caller's address; "" when unknown, and those share one
        count): the result carries a new bearer token (only its hash is stored) and the
        principal, or nothing, or the seconds to wait when the throttle refused."""
        result = self._attempt(username, password, client)
        if result.principal is None:
            return result
        return LoginResult(result.principal, self.start_session(result.principal))

    def start_session(self, principal: Principal) -> str:
        """A new session for ``principal`` (already authenticated): its bearer token."""
        token = secrets.token_urlsafe(32)
        with self.db.session() as s:
            s.add(
                AuthSession(
                    token_hash=_token_hash(token),
                    user_id=principal.user_id,
                    expires_at=datetime.now(UTC) + self.ttl,
                )
            )
        return token

    def _may_act(self, user: User, api_key: bool) -> bool:
        """A directory account acts only while its directory confirms it (``DirectoryGate``);
        asked outside any open transaction (it may write an audit line)."""
        if user.source == LOCAL:
            return True
        return self.directory is not None and self.directory.gate.allows(user, api_key)

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
            if aware_utc(sess.expires_at) < datetime.now(UTC) or user.disabled:
                return None
        if not self._may_act(user, api_key=False):
            return None
        with self.db.session() as s:  # read again: the check may have changed its groups
            fresh = s.get(User, user.id)
            return None if fresh is None else _principal(s, fresh)

    def principal_by_id(self, user_id: int) -> Principal | None:
        """The enabled user ``user_id`` acting through an API key (a directory account only
        while its directory confirms it)."""
        with self.db.session() as s:
            user = s.get(User, user_id)
            if user is None or user.disabled:
                return None
        if not self._may_act(user, api_key=True):
            return None
        with self.db.session() as s:  # read again: the check may have changed its groups
            fresh = s.get(User, user.id)
            return None if fresh is None else _principal(s, fresh)

    def principal_for(self, username: str) -> Principal | None:
        with self.db.session() as s:
            user = s.scalar(select(User).where(User.username == username))
            if user is None or user.disabled:
                return None
            return _principal(s, user)

    def audit(self, actor: str, action: str, detail: dict) -> None:
        """Record a sign-in event that happened outside this service (an OIDC refusal)."""
        with self.db.session() as s:
            s.add(AuditEvent(actor=escaped_controls(actor)[:64], action=action, detail=detail))

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
