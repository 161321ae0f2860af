"""The people and groups both test identity servers start with (slapd via ldif.py, and
oidc_provider.py).

Both servers are seeded from these lists, so a test can name the same person in LDAP and OIDC.
``root`` is a directory user on purpose: a directory (or IdP) user named like the appliance's
local administrator must not shadow that administrator.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SeedUser:
    uid: str  # LDAP uid, OIDC preferred_username
    password: str
    cn: str  # LDAP cn, OIDC name
    groups: tuple[str, ...] = field(default=())

    @property
    def mail(self) -> str:
        return f"{self.uid}@example.com"

    @property
    def sub(self) -> str:
        """The OIDC subject: stable, and deliberately not the username."""
        return f"sub-{self.uid}-0001"


SEED_USERS: tuple[SeedUser, ...] = (
    SeedUser("alice", "alice-pass-1", "Alice Anders", ("staff-all", "hr-team")),
    SeedUser("bob", "bob-pass-1", "Bob Brown", ("staff-all",)),
    SeedUser("carol", "carol-pass-1", "Carol Clark", ("admins",)),
    SeedUser("dave", "dave-pass-1", "Dave Davis", ()),
    SeedUser("root", "root-dir-pass", "Directory Root", ()),
)

# groups of people; `engineering` has the group hr-team as its member (a nested group)
SEED_GROUPS: tuple[str, ...] = ("staff-all", "hr-team", "admins")
NESTED_GROUPS: dict[str, tuple[str, ...]] = {"engineering": ("hr-team",)}


def seed_user(uid: str) -> SeedUser:
    for user in SEED_USERS:
        if user.uid == uid:
            return user
    raise KeyError(uid)
