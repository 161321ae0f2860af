"""Directory groups → the appliance's role and collections (pure; ``[directory]`` config).

Applied at every directory sign-in and account check, so a group change takes effect at the
next one. Group names compare case-insensitively (AD's do).
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.core.directory_config import DirectoryConfig


@dataclass(frozen=True)
class DirectoryAccount:
    """A directory account as the provider describes it: ``source`` is ``ldap`` or ``oidc``,
    ``external_id`` the provider's stable id (the LDAP DN; the OIDC issuer and subject)."""

    source: str
    external_id: str
    username: str
    groups: frozenset[str]
    display_name: str = ""
    email: str = ""


@dataclass(frozen=True)
class Access:
    """What a directory account may do here: a role and collections, or ``refused`` with
    the reason (no group that admits it)."""

    role: str = ""
    collections: tuple[str, ...] = ()
    refused: str = ""


def _folded(names: object) -> set[str]:
    return {str(n).casefold() for n in names}  # type: ignore[attr-defined]


def access_for(groups: frozenset[str], mapping: DirectoryConfig) -> Access:
    """The role and collections ``groups`` grant under ``mapping``."""
    mine = _folded(groups)
    if mine & _folded(mapping.admin_groups):
        role = "admin"
    elif not mapping.staff_groups or mine & _folded(mapping.staff_groups):
        role = "staff"
    else:
        return Access(refused="the account is in none of the groups allowed to use the appliance")
    granted: set[str] = set()
    for group, collections in mapping.group_collections.items():
        if group.casefold() in mine:
            granted.update(collections)
    return Access(role, tuple(sorted(granted or set(mapping.default_collections))))
