"""User administration: accounts, roles, collection access, passwords and API keys.

Passwords go through ``AuthService`` (Argon2); a reset also revokes the user's API keys. Every
change is audited with the acting admin.
Guards: an admin cannot disable or demote themselves, and the last enabled admin stays one.
API keys are listed and revoked here directly over ``api_keys`` (only hashes are stored);
new keys are issued by the auth service's key store when it has one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import delete, func, select, update

from appliance.core.auth.principal import ROLES
from appliance.core.auth.service import AuthError, AuthService, generate_password
from appliance.core.db.models import ApiKey, AuditEvent, AuthSession, User, UserCollection
from appliance.core.services.admin.documents import AdminError


@dataclass(frozen=True)
class PasswordReset:
    """An admin's password reset: the new password (to show once) and what it ended."""

    password: str
    sessions_ended: int
    api_keys_revoked: int


class AdminUsers:
    def __init__(self, auth: AuthService) -> None:
        self.auth = auth
        self.db = auth.db

    def _audit(self, s, actor: str, action: str, detail: dict) -> None:  # noqa: ANN001
        s.add(AuditEvent(actor=actor, action=action, detail=detail))

    def _user(self, s, username: str) -> User:  # noqa: ANN001
        user = s.scalar(select(User).where(User.username == username))
        if user is None:
            raise AdminError(f"no user {username!r}")
        return user

    def list_users(self) -> list[dict]:
        """Every account, with where it lives (``source``: local, ldap or oidc)."""
        with self.db.session() as s:
            grants: dict[int, list[str]] = {}
            for uid, coll in s.execute(select(UserCollection.user_id, UserCollection.collection)):
                grants.setdefault(uid, []).append(coll)
            keys = dict(
                s.execute(
                    select(ApiKey.user_id, func.count(ApiKey.id))
                    .where(ApiKey.revoked_at.is_(None))
                    .group_by(ApiKey.user_id)
                ).all()
            )
            return [
                {
                    "username": u.username,
                    "role": u.role,
                    "status": "disabled" if u.disabled else "active",
                    "source": u.source,
                    "collections": "all"
                    if u.role == "admin"
                    else ", ".join(sorted(grants.get(u.id, ["default"]))),
                    "api_keys": keys.get(u.id, 0),
                    "created": u.created_at.isoformat(timespec="seconds"),
                }
                for u in s.scalars(select(User).order_by(User.username))
            ]

    def create(
        self, actor: str, username: str, password: str, role: str, collections: list[str]
    ) -> str:
        """Create an account; an empty password is generated. Returns the password."""
        password = password or generate_password()
        try:  # one transaction: a refused collection name creates no user
            self.auth.create_user(username, password, role=role, collections=collections or None)
        except AuthError as exc:
            raise AdminError(str(exc)) from exc
        with self.db.session() as s:
            self._audit(s, actor, "admin.user.create", {"username": username.strip(), "role": role})
        return password

    def _other_admins(self, s, user: User) -> int:  # noqa: ANN001
        return s.scalar(
            select(func.count(User.id)).where(
                User.role == "admin", User.disabled.is_(False), User.id != user.id
            )
        )

    def set_disabled(self, actor: str, username: str, disabled: bool) -> None:
        """Disable (their sessions end at once, and their API keys are revoked: enabling the
        account again brings none back) or re-enable an account."""
        with self.db.session() as s:
            user = self._user(s, username)
            if disabled and user.username == actor:
                raise AdminError("you cannot disable your own account")
            if disabled and user.role == "admin" and not self._other_admins(s, user):
                raise AdminError("the last enabled admin cannot be disabled")
            user.disabled = disabled
            detail: dict[str, object] = {"username": username}
            if disabled:
                s.execute(delete(AuthSession).where(AuthSession.user_id == user.id))
                revoked = s.execute(
                    update(ApiKey)
                    .where(ApiKey.user_id == user.id, ApiKey.revoked_at.is_(None))
                    .values(revoked_at=datetime.now(UTC))
                )
                detail["api_keys_revoked"] = revoked.rowcount
            action = "admin.user.disable" if disabled else "admin.user.enable"
            self._audit(s, actor, action, detail)

    def set_role(self, actor: str, username: str, role: str) -> None:
        if role not in ROLES:
            raise AdminError(f"role must be one of {', '.join(ROLES)}")
        with self.db.session() as s:
            user = self._user(s, username)
            if user.role == role:
                return
            _managed_here(user)
            if user.role == "admin" and user.username == actor:
                raise AdminError("you cannot remove your own admin role")
            if user.role == "admin" and not self._other_admins(s, user):
                raise AdminError("the last enabled admin must stay an admin")
            detail = {"username": username, "from": user.role, "to": role}
            user.role = role
            self._audit(s, actor, "admin.user.role", detail)

    def set_collections(self, actor: str, username: str, collections: list[str]) -> None:
        with self.db.session() as s:
            _managed_here(self._user(s, username))
        try:
            principal = self.auth.set_collections(username, collections)
        except AuthError as exc:
            raise AdminError(str(exc)) from exc
        with self.db.session() as s:
            detail = {"username": username, "collections": sorted(principal.collections)}
            self._audit(s, actor, "admin.user.collections", detail)

    def reset_password(self, actor: str, username: str, password: str = "") -> PasswordReset:
        """Set a new password (generated when empty): the user's sessions end and their API
        keys are revoked (whoever had the old password may have made them)."""
        password = password or generate_password()
        try:
            change = self.auth.set_password(username, password)
        except AuthError as exc:
            raise AdminError(str(exc)) from exc
        detail = {
            "username": username,
            "sessions_ended": change.sessions_ended,
            "api_keys_revoked": change.api_keys_revoked,
        }
        with self.db.session() as s:
            self._audit(s, actor, "admin.user.password", detail)
        return PasswordReset(password, change.sessions_ended, change.api_keys_revoked)

    # ---- API keys -------------------------------------------------------------------------

    def list_keys(self) -> list[dict]:
        with self.db.session() as s:
            rows = s.execute(
                select(ApiKey, User.username).join(User).order_by(ApiKey.id.desc())
            ).all()
            return [
                {
                    "id": k.id,
                    "username": name,
                    "name": k.name,
                    "prefix": k.prefix,
                    "created": k.created_at.isoformat(timespec="seconds"),
                    "last_used": k.last_used_at.isoformat(timespec="seconds")
                    if k.last_used_at
                    else "",
                    "status": "revoked" if k.revoked_at else "active",
                }
                for k, name in rows
            ]

    def create_key(self, actor: str, username: str, name: str) -> str:
        """Issue a key for ``username`` through the auth service's key store; the key is
        returned once (only its hash is kept)."""
        store = getattr(self.auth, "api_keys", None)
        if store is None or not hasattr(store, "create"):
            raise AdminError("API keys are not available in this build")
        principal = self.auth.principal_for(username)
        if principal is None:
            raise AdminError(f"no enabled user {username!r}")
        name = (name or "").strip() or "admin-issued"
        try:
            created = store.create(principal, name)
        except ValueError as exc:
            raise AdminError(str(exc)) from exc
        key = created[0] if isinstance(created, tuple) else created
        with self.db.session() as s:
            self._audit(s, actor, "admin.apikey.create", {"username": username, "name": name})
        return str(key)

    def revoke_key(self, actor: str, key_id: int) -> None:
        with self.db.session() as s:
            key = s.get(ApiKey, int(key_id))
            if key is None:
                raise AdminError(f"no API key {key_id}")
            if key.revoked_at is None:
                key.revoked_at = datetime.now(UTC)
            self._audit(s, actor, "admin.apikey.revoke", {"id": key.id, "prefix": key.prefix})


def _managed_here(user: User) -> None:
    """A directory account's role and collections follow its groups at every sign-in: a
    change here would be undone silently, so it is refused with where to make it."""
    if user.source != "local":
        raise AdminError(
            f"{user.username!r} is a {user.source} account: its role and collections follow its "
            "directory groups (the Sign-in tab's group mapping); change them there"
        )
