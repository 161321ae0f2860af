"""LDIF text for the test slapd: one attribute line, the seed entries, and ldapsearch's output
read back into dicts."""

from __future__ import annotations

import base64
import re

from support.directory_seed import NESTED_GROUPS, SEED_GROUPS, SEED_USERS
from support.slapd_config import (
    BASE_DN,
    EMPTY_MEMBER,
    GROUPS_DN,
    PEOPLE_DN,
    SVC_DN,
    SVC_PASSWORD,
    group_dn,
    ssha,
    user_dn,
)

_ATTR = re.compile(r"^([A-Za-z0-9;.-]+)(::?) ?(.*)$")


def ldif_value(name: str, value: str) -> str:
    """``name: value``, or ``name:: <base64>`` where LDIF needs it (non-ASCII, edge spaces)."""
    if value and (value[0] in " :<" or value[-1] == " " or not value.isascii() or "\n" in value):
        return f"{name}:: {base64.b64encode(value.encode()).decode()}"
    return f"{name}: {value}"


def _entry(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def base_entries() -> str:
    """The base entry and the service account (``SVC_DN`` / ``SVC_PASSWORD``)."""
    return (
        f"dn: {BASE_DN}\nobjectClass: dcObject\nobjectClass: organization\n"
        "dc: example\no: Example\n\n"
        f"dn: {SVC_DN}\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\n"
        f"cn: svc\nuserPassword: {ssha(SVC_PASSWORD)}\n"
    )


def seed_entries() -> str:
    """ou=people and ou=groups with the seed people and groups of ``directory_seed``."""
    entries = [
        _entry(f"dn: {PEOPLE_DN}", "objectClass: organizationalUnit", "ou: people"),
        _entry(f"dn: {GROUPS_DN}", "objectClass: organizationalUnit", "ou: groups"),
    ]
    for u in SEED_USERS:
        entries.append(
            _entry(
                f"dn: {user_dn(u.uid)}",
                "objectClass: inetOrgPerson",
                f"uid: {u.uid}",
                f"cn: {u.cn}",
                f"sn: {u.cn.split()[-1]}",
                f"mail: {u.mail}",
                f"userPassword: {ssha(u.password)}",
            )
        )
    for g in SEED_GROUPS:
        members = [user_dn(u.uid) for u in SEED_USERS if g in u.groups] or [EMPTY_MEMBER]
        entries.append(
            _entry(
                f"dn: {group_dn(g)}",
                "objectClass: groupOfNames",
                f"cn: {g}",
                *(f"member: {m}" for m in members),
            )
        )
    for g, children in NESTED_GROUPS.items():
        entries.append(
            _entry(
                f"dn: {group_dn(g)}",
                "objectClass: groupOfNames",
                f"cn: {g}",
                *(f"member: {group_dn(c)}" for c in children),
            )
        )
    return "\n".join(entries)


def parse_ldif(text: str) -> list[dict[str, list[str]]]:
    """ldapsearch's ``-LLL`` output as entries ``{"dn": [dn], attribute: values}``."""
    entries: list[dict[str, list[str]]] = []
    for block in text.strip().split("\n\n"):
        entry: dict[str, list[str]] = {}
        for line in block.splitlines():
            if not line or line.startswith("#"):
                continue
            match = _ATTR.match(line)
            if match is None:
                continue
            name, sep, value = match.groups()
            if sep == "::":
                value = base64.b64decode(value).decode("utf-8", "replace")
            entry.setdefault(name, []).append(value)
        if entry:
            entries.append(entry)
    return entries
