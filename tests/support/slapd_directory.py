"""What the tests do to a running test slapd's entries: search, bind, and add, change, disable
and delete people and groups. It all goes through the OpenLDAP command line tools (ldap-utils),
as the rootdn unless said otherwise, so the fixtures need no Python LDAP library."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

from support.ldif import base_entries, ldif_value, parse_ldif, seed_entries
from support.slapd_config import (
    BASE_DN,
    DISABLED,
    EMPTY_MEMBER,
    GROUPS_DN,
    PEOPLE_DN,
    ROOT_DN,
    SVC_DN,
    SVC_PASSWORD,
    group_dn,
    ssha,
    user_dn,
)


class LdapToolError(RuntimeError):
    """An ldap-utils command failed; ``rc`` is its exit status (the LDAP result code)."""

    def __init__(self, tool: str, rc: int, output: str) -> None:
        super().__init__(f"{tool} failed with LDAP result {rc}: {output.strip()}")
        self.rc = rc


class DirectoryEditor:
    """The entries of the slapd at ``host``: ``port`` (ldap://, StartTLS offered) and
    ``ldaps_port`` (ldaps://). The server sets ``folder`` (ldap.conf and HOME of the tools),
    the ports and ``root_password``; see slapd.py's docstring for the directory's shape."""

    host = "127.0.0.1"
    folder: Path
    port: int
    ldaps_port: int
    root_password: str

    # ---- addresses
    @property
    def ldap_url(self) -> str:
        return f"ldap://{self.host}:{self.port}"

    @property
    def ldaps_url(self) -> str:
        return f"ldaps://{self.host}:{self.ldaps_port}"

    def user_dn(self, uid: str) -> str:
        return user_dn(uid)

    def group_dn(self, cn: str) -> str:
        return group_dn(cn)

    # ---- the command line tools
    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LDAP")}
        env.update(LDAPCONF=str(self.folder / "ldap.conf"), HOME=str(self.folder))
        return env

    def _tool(self, tool: str, args: list[str], ldif: str | None = None, **bind) -> str:  # noqa: ANN003
        url = bind.get("url") or self.ldap_url
        dn = bind.get("dn", ROOT_DN)
        password = bind.get("password", self.root_password)
        cmd = [tool, "-x", "-H", url, "-o", "nettimeout=5"]
        if bind.get("starttls"):
            cmd.append("-ZZ")
        if dn is not None:
            cmd += ["-D", dn, "-w", password]
        proc = subprocess.run(
            cmd + args,
            input=ldif,
            capture_output=True,
            text=True,
            env=self._env(),
            cwd=self.folder,
            timeout=30,
        )
        if proc.returncode != 0:
            raise LdapToolError(tool, proc.returncode, proc.stderr + proc.stdout)
        return proc.stdout

    def modify(self, ldif: str, *, add: bool = False) -> None:
        """Apply LDIF as the rootdn (``changetype`` records, or plain entries with add=True)."""
        self._tool("ldapadd" if add else "ldapmodify", [], ldif)

    def search(
        self,
        filter: str = "(objectClass=*)",  # noqa: A002
        attributes: Iterable[str] = ("*", "memberOf"),
        *,
        base: str | None = None,
        scope: str = "sub",
        bind_dn: str | None = SVC_DN,
        password: str = SVC_PASSWORD,
        tls: str = "none",
    ) -> list[dict[str, list[str]]]:
        """ldapsearch as ``bind_dn`` (None: anonymous); ``tls``: none, starttls (-ZZ) or ldaps,
        both verified against ``ca_file``. Returns the entries as {"dn": [dn], attr: values}."""
        assert tls in ("none", "starttls", "ldaps"), tls
        url = self.ldaps_url if tls == "ldaps" else self.ldap_url
        args = ["-LLL", "-o", "ldif-wrap=no", "-b", base or BASE_DN, "-s", scope, filter]
        out = self._tool(
            "ldapsearch",
            args + list(attributes),
            url=url,
            dn=bind_dn,
            password=password,
            starttls=tls == "starttls",
        )
        return parse_ldif(out)

    def bind_ok(self, dn: str, password: str, *, tls: str = "none") -> bool:
        """Whether a simple bind as ``dn`` succeeds (ldapwhoami)."""
        url = self.ldaps_url if tls == "ldaps" else self.ldap_url
        try:
            self._tool(
                "ldapwhoami", [], url=url, dn=dn, password=password, starttls=tls == "starttls"
            )
        except LdapToolError as exc:
            if exc.rc == 49:  # invalidCredentials
                return False
            raise
        return True

    # ---- people and groups
    def add_user(
        self,
        uid: str,
        password: str,
        cn: str | None = None,
        mail: str | None = None,
        *,
        groups: Iterable[str] = (),
        disabled: bool = False,
    ) -> str:
        """Add ``uid=<uid>,ou=people`` (inetOrgPerson); return its DN."""
        cn = cn or uid.title()
        lines = [
            f"dn: {self.user_dn(uid)}",
            "objectClass: inetOrgPerson",
            ldif_value("uid", uid),
            ldif_value("cn", cn),
            ldif_value("sn", cn.split()[-1]),
            ldif_value("mail", mail or f"{uid}@example.com"),
            f"userPassword: {ssha(password)}",
        ]
        if disabled:
            lines.append(f"employeeType: {DISABLED}")
        self.modify("\n".join(lines) + "\n", add=True)
        for group in groups:
            self.add_to_group(uid, group)
        return self.user_dn(uid)

    def delete_user(self, uid: str) -> None:
        """Delete the user; memberof-refint takes them out of their groups."""
        for group in self.groups_of(uid):
            self.remove_from_group(uid, group)
        self._tool("ldapdelete", [self.user_dn(uid)])

    def set_password(self, uid: str, password: str) -> None:
        self._replace(self.user_dn(uid), "userPassword", ssha(password))

    def set_attribute(self, uid: str, name: str, *values: str) -> None:
        """Replace (or, with no values, delete) an attribute of the user."""
        self._replace(self.user_dn(uid), name, *values)

    def disable_user(self, uid: str) -> None:
        """``employeeType: disabled``: the appliance's user filter must exclude them."""
        self._replace(self.user_dn(uid), "employeeType", DISABLED)

    def enable_user(self, uid: str) -> None:
        self._replace(self.user_dn(uid), "employeeType")

    def add_group(self, cn: str, members: Iterable[str] = ()) -> str:
        """Add a groupOfNames; ``members`` are uids or full DNs (nested groups)."""
        dns = [self._member_dn(m) for m in members] or [EMPTY_MEMBER]
        lines = [f"dn: {self.group_dn(cn)}", "objectClass: groupOfNames", ldif_value("cn", cn)]
        lines += [ldif_value("member", dn) for dn in dns]
        self.modify("\n".join(lines) + "\n", add=True)
        return self.group_dn(cn)

    def delete_group(self, cn: str) -> None:
        self._tool("ldapdelete", [self.group_dn(cn)])

    def add_to_group(self, member: str, group: str, *, create: bool = True) -> None:
        """Add a user (uid) or any DN to the group; ``create`` makes a missing group."""
        dn = self._member_dn(member)
        if create and not self.search(f"(cn={group})", ["cn"], base=GROUPS_DN, scope="one"):
            self.add_group(group, [dn])
            return
        self.modify(
            f"dn: {self.group_dn(group)}\nchangetype: modify\nadd: member\n"
            f"{ldif_value('member', dn)}\n"
        )
        with suppress(LdapToolError):  # noSuchAttribute: there was no placeholder
            self._tool(
                "ldapmodify",
                [],
                f"dn: {self.group_dn(group)}\nchangetype: modify\ndelete: member\n"
                f"member: {EMPTY_MEMBER}\n",
            )

    def remove_from_group(self, member: str, group: str) -> None:
        dn = self._member_dn(member)
        members = self.search(f"(cn={group})", ["member"], base=GROUPS_DN, scope="one")
        current = members[0].get("member", []) if members else []
        if [m.lower() for m in current] == [dn.lower()]:
            change = f"replace: member\nmember: {EMPTY_MEMBER}\n"  # groupOfNames needs one
        else:
            change = f"delete: member\n{ldif_value('member', dn)}\n"
        self.modify(f"dn: {self.group_dn(group)}\nchangetype: modify\n{change}")

    def groups_of(self, uid: str) -> list[str]:
        """The cns of the groups that list the user as a member (not nested ones)."""
        found = self.search(f"(member={self.user_dn(uid)})", ["cn"], base=GROUPS_DN, scope="one")
        return sorted(e["cn"][0] for e in found)

    def user(self, uid: str) -> dict[str, list[str]] | None:
        """The user's entry as the rootdn sees it (with memberOf), or None."""
        found = self.search(
            f"(uid={uid})",
            ["*", "memberOf"],
            base=PEOPLE_DN,
            scope="one",
            bind_dn=ROOT_DN,
            password=self.root_password,
        )
        return found[0] if found else None

    def _member_dn(self, member: str) -> str:
        return member if "=" in member else self.user_dn(member)

    def _replace(self, dn: str, name: str, *values: str) -> None:
        lines = [f"dn: {dn}", "changetype: modify", f"replace: {name}"]
        lines += [ldif_value(name, v) for v in values]
        self.modify("\n".join(lines) + "\n")

    # ---- the seed
    def seed_ldif(self) -> str:
        """The seed people and groups as LDIF."""
        return seed_entries()

    def seed(self) -> None:
        """The base entry, the service account and the seed people and groups."""
        self.modify(base_entries() + "\n" + seed_entries(), add=True)

    def restore_seed(self) -> None:
        """Drop everything under ou=people and ou=groups, add the seed again, and restore the
        service account's password."""
        for ou in (GROUPS_DN, PEOPLE_DN):  # groups first: memberOf follows, no empty groups
            with suppress(LdapToolError):
                self._tool("ldapdelete", ["-r", ou])
        self.modify(seed_entries(), add=True)
        self._replace(SVC_DN, "userPassword", ssha(SVC_PASSWORD))
