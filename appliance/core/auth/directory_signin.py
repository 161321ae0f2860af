"""Sign-in through the company directory: an LDAP password check, or the claims of an OIDC
provider's verified ID token, turned into a local principal (``directory_accounts``).

``AuthService`` asks ``handles`` first: a name that belongs to a local account is always
checked locally (the break-glass admin cannot be shadowed), any other name goes to LDAP when
it is enabled.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sqlalchemy import select

from appliance.core.auth.directory_accounts import (
    LOCAL,
    DirectoryAccounts,
    DirectoryGate,
    DirectorySettings,
    SignIn,
)
from appliance.core.auth.directory_map import DirectoryAccount
from appliance.core.auth.ldap_directory import DirectoryDown, LdapDirectory
from appliance.core.db.models import AuditEvent, User
from appliance.core.db.session import Database
from appliance.core.directory_config import LdapConfig

# a directory found down is not asked again this soon: a burst of sign-ins would otherwise hold
# a worker thread each for the whole connect timeout
RECHECK_DOWN_S = 10.0
DIRECTORY_DOWN = (
    "The company directory cannot be reached right now. Try again shortly, or ask an administrator."
)


class ClaimsError(ValueError):
    """An ID token's claims lack what a sign-in needs (the message says which)."""


def _claim(claims: Mapping[str, object], path: str) -> object:
    """A claim by name, or by a dotted path into nested objects (``realm_access.roles``)."""
    node: object = claims
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def oidc_account(
    claims: Mapping[str, object], username_claim: str, groups_claim: str
) -> DirectoryAccount:
    """The directory account an OIDC provider's verified claims describe."""
    name = _claim(claims, username_claim)
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > 64:
        raise ClaimsError(f"the provider sent no usable {username_claim!r} claim")
    raw = _claim(claims, groups_claim)
    if isinstance(raw, str):
        raw = [raw]
    groups = (
        frozenset(g for g in raw if isinstance(g, str)) if isinstance(raw, list) else frozenset()
    )
    return DirectoryAccount(
        source="oidc",
        external_id=f"{claims.get('iss')} {claims.get('sub')}",
        username=name.strip(),
        groups=groups,
        display_name=str(claims.get("name") or ""),
        email=str(claims.get("email") or ""),
    )


@dataclass(frozen=True)
class PasswordSignIn(SignIn):
    """``SignIn`` for an LDAP password: ``checked`` is False when the password was not
    verified at all (the directory could not be asked)."""

    checked: bool = True


class DirectorySignIn:
    """The directory half of sign-in over one database; ``settings`` is read at each use."""

    def __init__(
        self,
        db: Database,
        settings: Callable[[], DirectorySettings],
        ldap: Callable[[LdapConfig], LdapDirectory] = LdapDirectory,
    ) -> None:
        self.db = db
        self.settings = settings
        self.ldap = ldap
        self.accounts = DirectoryAccounts(db)
        self.gate = DirectoryGate(self.accounts, settings, ldap)
        self._down_at = -RECHECK_DOWN_S  # monotonic time the directory was last found down

    def handles(self, username: str) -> bool:
        """Whether ``username``'s password goes to LDAP: LDAP is on and no local account
        has that name."""
        if not self.settings().ldap.enabled:
            return False
        with self.db.session() as s:
            source = s.scalar(select(User.source).where(User.username == username))
        return source != LOCAL

    def password(self, username: str, password: str, client: str) -> PasswordSignIn:
        """Check ``username``'s password with LDAP; audited (``login.failed`` for a wrong
        one, ``login.directory.down`` when the directory cannot be asked)."""
        current = self.settings()
        if time.monotonic() - self._down_at < RECHECK_DOWN_S:
            detail = {"client": client, "error": "down a moment ago; not asked again yet"}
            self._audit(username, "login.directory.down", detail)
            return PasswordSignIn(refused=DIRECTORY_DOWN, checked=False)
        try:
            account = self.ldap(current.ldap).authenticate(username, password)
        except DirectoryDown as exc:
            self._down_at = time.monotonic()
            self._audit(username, "login.directory.down", {"client": client, "error": str(exc)})
            return PasswordSignIn(refused=DIRECTORY_DOWN, checked=False)
        if account is None:
            self._audit(username, "login.failed", {"client": client, "source": "ldap"})
            return PasswordSignIn()
        outcome = self.accounts.sign_in(account, current.mapping, client)
        if outcome.principal is not None:
            self.gate.forget(outcome.principal.user_id)
        return PasswordSignIn(outcome.principal, outcome.refused)

    def claims(self, claims: Mapping[str, object], client: str) -> SignIn:
        """Sign in the account of an OIDC provider's verified ``claims``."""
        current = self.settings()
        try:
            account = oidc_account(claims, current.oidc.username_claim, current.oidc.groups_claim)
        except ClaimsError as exc:
            self._audit("(oidc)", "login.oidc.failed", {"client": client, "reason": str(exc)})
            return SignIn(refused=str(exc))
        return self.accounts.sign_in(account, current.mapping, client)

    def _audit(self, actor: str, action: str, detail: dict) -> None:
        with self.db.session() as s:
            s.add(AuditEvent(actor=actor[:64], action=action, detail=detail))
