"""LDAP / Active Directory accounts (the I/O edge; ``ldap3``, pure Python, so the installer
and an air-gapped bundle need no C library or OpenLDAP headers, and it speaks StartTLS, LDAPS
and AD's matching rules).

A sign-in binds as the service account, finds the user with ``ldap.user_filter`` (the typed
name escaped per RFC 4515, so ``*)(uid=*`` matches nothing), then binds as the user's DN with
the typed password. Every connection is verified TLS unless the URL is plain ``ldap://`` with
``start_tls`` off. Groups come from ``memberOf`` or from a group search (``group_base``),
nested ones through AD's in-chain rule when asked.
"""

from __future__ import annotations

import math
import ssl
from dataclasses import dataclass

from ldap3 import NONE, SUBTREE, Connection, Server, Tls
from ldap3.core.exceptions import LDAPException
from ldap3.utils.conv import escape_filter_chars
from ldap3.utils.dn import parse_dn

from appliance.core.auth.directory_map import DirectoryAccount
from appliance.core.directory_config import AD_IN_CHAIN, LdapConfig

INVALID_CREDENTIALS = 49


class DirectoryDown(Exception):
    """The directory could not be asked: unreachable, TLS refused, or the service account's
    bind refused. The message says which, for the admin (never shown to a signing-in user)."""


@dataclass(frozen=True)
class _Entry:
    dn: str
    username: str
    attributes: dict


def _first(values: object) -> str:
    if isinstance(values, list | tuple):
        return str(values[0]) if values else ""
    return "" if values is None else str(values)


def _rdn_value(dn: str) -> str:
    """``cn=hr-team,ou=groups,dc=x`` → ``hr-team``."""
    try:
        return parse_dn(dn)[0][1]
    except (LDAPException, IndexError, ValueError):
        return dn


class LdapDirectory:
    """Sign-in checks and account look-ups against one LDAP server (``LdapConfig``)."""

    def __init__(self, config: LdapConfig) -> None:
        self.config = config

    def _server(self) -> Server:
        c = self.config
        tls = Tls(
            ca_certs_file=c.ca_file or None,
            validate=ssl.CERT_REQUIRED,
            version=ssl.PROTOCOL_TLS_CLIENT,
        )
        return Server(
            c.url,
            use_ssl=c.url.lower().startswith("ldaps://"),
            tls=tls,
            connect_timeout=c.timeout_s,
            get_info=NONE,
        )

    def _open(self, user: str, password: str) -> tuple[Connection, bool]:
        """A connection bound as ``user``: (it, whether the bind succeeded). Raises
        ``DirectoryDown`` when the server cannot be reached or TLS fails."""
        c = self.config
        conn = Connection(
            self._server(),
            user=user,
            password=password,
            receive_timeout=math.ceil(c.timeout_s),  # ldap3 packs it as an integer
            read_only=True,
            raise_exceptions=False,
            auto_referrals=False,
        )
        try:
            conn.open()
            plain = not c.url.lower().startswith("ldaps://")
            if c.start_tls and plain and not conn.start_tls():
                raise DirectoryDown(f"StartTLS refused: {conn.result.get('description')}")
            ok = conn.bind()
        except (LDAPException, OSError) as exc:
            conn.unbind()
            raise DirectoryDown(f"cannot reach {c.url}: {exc}") from exc
        if not ok and conn.result.get("result") != INVALID_CREDENTIALS:
            conn.unbind()
            raise DirectoryDown(f"bind refused: {conn.result.get('description')}")
        return conn, ok

    def _service(self) -> Connection:
        conn, ok = self._open(self.config.bind_dn, self.config.bind_password)
        if not ok:
            conn.unbind()
            raise DirectoryDown("the service account's bind was refused (ldap.bind_dn/password)")
        return conn

    def _find(self, conn: Connection, username: str) -> _Entry | None:
        c = self.config
        query = c.user_filter.replace("{username}", escape_filter_chars(username))
        attrs = [c.username_attribute, "memberOf", "cn", "displayName", "mail"]
        try:
            conn.search(c.user_base, query, SUBTREE, attributes=attrs, size_limit=2)
        except LDAPException as exc:
            raise DirectoryDown(f"user search failed: {exc}") from exc
        entries = [e for e in conn.response or [] if e.get("type") == "searchResEntry"]
        if len(entries) != 1:  # none, or ambiguous: no sign-in either way
            return None
        entry = entries[0]
        attributes = dict(entry.get("attributes") or {})
        name = _first(attributes.get(c.username_attribute)) or username
        return _Entry(entry["dn"], name, attributes)

    def _groups(self, conn: Connection, entry: _Entry) -> frozenset[str]:
        c = self.config
        if not c.group_base:
            return frozenset(_rdn_value(dn) for dn in entry.attributes.get("memberOf") or [])
        dn = escape_filter_chars(entry.dn)
        query = (
            f"(member:{AD_IN_CHAIN}:={dn})"
            if c.nested_groups
            else c.group_filter.replace("{dn}", dn)
        )
        try:
            conn.search(c.group_base, query, SUBTREE, attributes=[c.group_name_attribute])
        except LDAPException as exc:
            raise DirectoryDown(f"group search failed: {exc}") from exc
        names = (
            _first((e.get("attributes") or {}).get(c.group_name_attribute)) or _rdn_value(e["dn"])
            for e in conn.response or []
            if e.get("type") == "searchResEntry"
        )
        return frozenset(n for n in names if n)

    def _account(self, conn: Connection, entry: _Entry) -> DirectoryAccount:
        attrs = entry.attributes
        return DirectoryAccount(
            source="ldap",
            external_id=entry.dn,
            username=entry.username,
            groups=self._groups(conn, entry),
            display_name=_first(attrs.get("displayName")) or _first(attrs.get("cn")),
            email=_first(attrs.get("mail")),
        )

    def authenticate(self, username: str, password: str) -> DirectoryAccount | None:
        """The account for the right password; None for an unknown (or filtered-out, i.e.
        disabled) user or a wrong password. An empty password is refused here: LDAP would
        take it as an anonymous bind and "succeed"."""
        if not username or not password:
            return None
        conn = self._service()
        try:
            entry = self._find(conn, username)
            if entry is None:
                return None
            user_conn, ok = self._open(entry.dn, password)
            user_conn.unbind()
            return self._account(conn, entry) if ok else None
        finally:
            conn.unbind()

    def lookup(self, username: str) -> DirectoryAccount | None:
        """The account as the directory has it now (the service account's view), or None
        when the user filter no longer finds it (deleted or disabled)."""
        conn = self._service()
        try:
            entry = self._find(conn, username)
            return None if entry is None else self._account(conn, entry)
        finally:
            conn.unbind()

    def test_connection(self) -> str:
        """One line on what works: the service account binds and can read the user base."""
        conn = self._service()
        try:
            ok = conn.search(self.config.user_base, "(objectClass=*)", SUBTREE, size_limit=1)
            if not ok and conn.result.get("result") not in (0, 4):  # 4: size limit reached
                raise DirectoryDown(f"cannot read {self.config.user_base}: {conn.result}")
        finally:
            conn.unbind()
        return f"bound as {self.config.bind_dn or '(anonymous)'} and read {self.config.user_base}"
