"""The local records of directory accounts, and whether one may still act.

A directory account (LDAP or OIDC) gets a local ``User`` on its first sign-in, for its
conversations, keys and audit, marked with its ``source`` and the directory's id for it; no
password is stored (``password_hash`` holds a marker no password verifies against). Every sign-in
re-applies the group mapping (``directory_map``): role and collections follow the groups.

Shadowing: a directory account never takes over a record of another source or another
directory id with the same name, so the local (break-glass) admin ``root`` stays local even
when the directory has a ``root``; that sign-in is refused and audited
``login.directory.shadowed``.

Account checks (``DirectoryGate.allows``): a session or API key of a directory account is
honoured only while the directory confirms the account: an LDAP account is looked up again
(still found by the user filter, i.e. not deleted or disabled, and still in a group that
admits it) once ``directory.check_interval_s`` has passed since the last confirmation; an OIDC
account's API keys work ``oidc.key_hours`` after its last sign-in (the provider cannot be asked
without the user). A directory that cannot be asked refuses (fail closed; the local admin
still signs in) and is asked again after ``RECHECK_DOWN_S``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from appliance.core.auth.directory_map import Access, DirectoryAccount, access_for
from appliance.core.auth.ldap_directory import DirectoryDown, LdapDirectory
from appliance.core.auth.principal import DEFAULT_COLLECTIONS, Principal
from appliance.core.auth.throttle import aware_utc
from appliance.core.db.models import AuditEvent, User, UserCollection
from appliance.core.db.session import Database
from appliance.core.directory_config import DirectoryConfig, LdapConfig, OidcConfig

NO_PASSWORD = "!directory"  # not an Argon2 hash: no password verifies against it
RECHECK_DOWN_S = 30.0  # a directory that could not be asked is asked again after this
LOCAL = "local"


@dataclass(frozen=True)
class DirectorySettings:
    """The directory config in force (the config file, overridden from the console)."""

    ldap: LdapConfig
    oidc: OidcConfig
    mapping: DirectoryConfig


@dataclass(frozen=True)
class SignIn:
    """A directory sign-in's outcome: the principal, or ``refused`` (a reason safe to show)."""

    principal: Principal | None = None
    refused: str = ""


def _audit(s: Session, actor: str, action: str, detail: dict) -> None:
    s.add(AuditEvent(actor=actor[:64], action=action, detail=detail))


def _apply(s: Session, user: User, access: Access) -> Principal:
    """Give ``user`` the role and collections of ``access``."""
    user.role = access.role
    s.execute(delete(UserCollection).where(UserCollection.user_id == user.id))
    s.add_all(UserCollection(user_id=user.id, collection=c) for c in access.collections)
    s.flush()
    granted = frozenset(access.collections) or DEFAULT_COLLECTIONS
    return Principal(user.id, user.username, user.role, granted)


class DirectoryAccounts:
    """Local records of directory accounts over one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def sign_in(self, account: DirectoryAccount, mapping: DirectoryConfig, client: str) -> SignIn:
        """Create or update the local record of ``account`` under ``mapping``; audited as
        ``login.ok`` (with the source, groups, role and collections) or a refusal."""
        access = access_for(account.groups, mapping)
        detail = {"client": client, "source": account.source, "groups": sorted(account.groups)}
        with self.db.session() as s:
            user = s.scalar(
                select(User).where(
                    User.source == account.source, User.external_id == account.external_id
                )
            )
            named = s.scalar(select(User).where(User.username == account.username))
            if named is not None and named is not user:
                _audit(s, account.username, "login.directory.shadowed", detail)
                return SignIn(refused="an account of that name already exists on this appliance")
            if access.refused:
                _audit(s, account.username, "login.directory.refused", detail)
                return SignIn(refused=access.refused)
            if user is None:
                user = User(
                    username=account.username,
                    password_hash=NO_PASSWORD,
                    source=account.source,
                    external_id=account.external_id,
                )
                s.add(user)
                s.flush()
                _audit(s, "system", "user.create", {"username": user.username, **detail})
            elif user.disabled:  # disabled here by an admin: the directory cannot undo that
                _audit(s, user.username, "login.failed", detail)
                return SignIn(refused="this account is disabled on the appliance")
            user.username = account.username  # renamed in the directory
            user.confirmed_at = datetime.now(UTC)
            principal = _apply(s, user, access)
            detail |= {"role": access.role, "collections": list(access.collections)}
            _audit(s, user.username, "login.ok", detail)
            return SignIn(principal)

    def refresh(
        self, user_id: int, account: DirectoryAccount | None, mapping: DirectoryConfig
    ) -> bool:
        """An account check's answer for ``user_id``: ``account`` as the directory has it now
        (None: gone or disabled there). Applies its groups; False when it may no longer act
        (audited ``directory.account.refused``)."""
        with self.db.session() as s:
            user = s.get(User, user_id)
            if user is None:
                return False
            access = access_for(account.groups, mapping) if account else Access(refused="gone")
            if account is None or access.refused:
                reason = (
                    "not found or disabled in the directory" if account is None else access.refused
                )
                _audit(s, user.username, "directory.account.refused", {"reason": reason})
                return False
            user.confirmed_at = datetime.now(UTC)
            _apply(s, user, access)
            return True


class DirectoryGate:
    """Whether a directory account's session or API key may act now (see the module
    docstring); local accounts always may. ``settings`` is read at each check."""

    def __init__(
        self,
        accounts: DirectoryAccounts,
        settings: Callable[[], DirectorySettings],
        ldap: Callable[[LdapConfig], LdapDirectory] = LdapDirectory,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.accounts = accounts
        self.settings = settings
        self.ldap = ldap
        self.clock = clock
        self._checked: dict[int, tuple[float, bool]] = {}  # user id → (when, answer)

    def allows(self, user: User, api_key: bool) -> bool:
        """``user`` (a row read just now) may act through a session, or an API key."""
        if user.source == LOCAL:
            return True
        current = self.settings()
        if user.source == "oidc":
            return self._oidc_allows(user, current.oidc, api_key)
        if user.source != "ldap" or not current.ldap.enabled:
            return False  # its directory is switched off: its accounts cannot act
        now = self.clock()
        seen = self._checked.get(user.id)
        if seen is not None:
            at, answer = seen
            interval = current.mapping.check_interval_s
            fresh_for = interval if answer else min(interval, RECHECK_DOWN_S)
            if now - at < fresh_for:
                return answer
        try:
            account = self.ldap(current.ldap).lookup(user.username)
            answer = self.accounts.refresh(user.id, account, current.mapping)
        except DirectoryDown as exc:
            with self.accounts.db.session() as s:
                _audit(s, user.username, "directory.down", {"error": str(exc)[:300]})
            answer = False
        self._checked[user.id] = (now, answer)
        return answer

    def forget(self, user_id: int) -> None:
        """Drop the cached answer (a fresh sign-in just confirmed the account)."""
        self._checked.pop(user_id, None)

    @staticmethod
    def _oidc_allows(user: User, oidc: OidcConfig, api_key: bool) -> bool:
        if not oidc.enabled:
            return False
        if not api_key or oidc.key_hours == 0:
            return True  # a session lives no longer than security.session_ttl_hours
        if user.confirmed_at is None:
            return False
        age = datetime.now(UTC) - aware_utc(user.confirmed_at)
        return age <= timedelta(hours=oidc.key_hours)
