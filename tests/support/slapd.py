"""A real OpenLDAP ``slapd`` for the directory sign-in tests.

``start_slapd()`` runs Debian's /usr/sbin/slapd from a temporary folder: its own slapd.conf
(``-f``), an mdb database for ``dc=example,dc=com`` with the memberof overlay, a self-signed CA
and server certificate (openssl), ``ldap://`` (StartTLS offered) and ``ldaps://`` on two free
loopback ports. It is seeded from ``directory_seed``::

    dc=example,dc=com
      cn=svc             the service account (svc-secret): may search and read everything
      ou=people          inetOrgPerson: uid, cn, sn, mail, userPassword ({SSHA}), employeeType
        uid=alice        staff-all, hr-team
        uid=bob          staff-all
        uid=carol        admins
        uid=dave         no groups
        uid=root         no groups (must not shadow the appliance's local root)
      ou=groups          groupOfNames (member: DNs)
        cn=staff-all, cn=hr-team, cn=admins
        cn=engineering   member: cn=hr-team,ou=groups,... (a nested group)

Worth knowing when writing tests against it:

* A **disabled** user has ``employeeType: disabled`` (``disable_user``). slapd still accepts the
  user's bind: only the appliance's user filter keeps them out, for instance
  ``(&(objectClass=inetOrgPerson)(uid={username})(!(employeeType=disabled)))``
  (``USER_FILTER``).
* ``memberOf`` comes from the memberof overlay and is operational: ask for it by name
  (``attributes=["memberOf"]``); ``*`` does not return it. It is not transitive: hr-team's entry
  has ``memberOf: cn=engineering,...`` but alice's has not (OpenLDAP has no
  LDAP_MATCHING_RULE_IN_CHAIN; follow ``memberOf`` of the groups to resolve nesting).
* groupOfNames needs at least one member: a group emptied by ``remove_from_group`` keeps the
  placeholder member ``EMPTY_MEMBER`` (a DN with no entry) until someone is added again.
* Anonymous binds succeed but may read nothing; a bind with a DN and an empty password is refused
  by slapd (unwillingToPerform, 53), unlike Active Directory, which treats it as anonymous.
* The changes go through the OpenLDAP command line tools (ldap-utils) as the rootdn, so the
  fixtures need no Python LDAP library.

The parts: slapd_config.py (the names, slapd.conf, the CA), slapd_directory.py (what tests do to
the entries), ldif.py (the seed), processes.py (the process).
"""

from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from support.processes import ServerProcess, free_port, port_accepts, scratch_folder
from support.slapd_config import (
    BASE_DN,
    DISABLED,
    EMPTY_MEMBER,
    GROUPS_DN,
    LDAP_TOOLS,
    MODULE_DIR,
    PEOPLE_DN,
    ROOT_DN,
    SCHEMA_DIR,
    SLAPD,
    SVC_DN,
    SVC_PASSWORD,
    USER_FILTER,
    make_tls,
    ssha,
    write_ldap_conf,
    write_slapd_conf,
)
from support.slapd_directory import DirectoryEditor, LdapToolError

__all__ = [
    "BASE_DN",
    "DISABLED",
    "EMPTY_MEMBER",
    "GROUPS_DN",
    "LDAP_TOOLS",
    "MODULE_DIR",
    "PEOPLE_DN",
    "ROOT_DN",
    "SCHEMA_DIR",
    "SLAPD",
    "SVC_DN",
    "SVC_PASSWORD",
    "USER_FILTER",
    "LdapToolError",
    "SlapdServer",
    "missing",
    "ssha",
    "start_slapd",
]


def missing() -> str | None:
    """None when slapd and ldap-utils are here, else why the LDAP tests cannot run."""
    if not os.access(SLAPD, os.X_OK):
        return f"{SLAPD} is missing (apt-get install slapd; scripts/directory_test_servers.sh)"
    for tool in LDAP_TOOLS:
        if shutil.which(tool) is None:
            return f"{tool} is missing (apt-get install ldap-utils)"
    if not (MODULE_DIR / "memberof.la").exists() and not (MODULE_DIR / "memberof.so").exists():
        return f"the slapd memberof module is missing from {MODULE_DIR}"
    if shutil.which("openssl") is None:
        return "openssl is missing (it makes the test CA)"
    return None


class SlapdServer(DirectoryEditor):
    """One slapd in its own folder. Use ``start_slapd()``; see the module docstring. The
    entries are read and changed with the methods of ``DirectoryEditor``."""

    base_dn = BASE_DN
    people_dn = PEOPLE_DN
    groups_dn = GROUPS_DN
    bind_dn = SVC_DN
    bind_password = SVC_PASSWORD
    root_dn = ROOT_DN
    user_filter = USER_FILTER

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.root_password = base64.urlsafe_b64encode(os.urandom(12)).decode()
        self.port = free_port()
        self.ldaps_port = free_port()
        self.ca_file, self.cert_file, self.key_file = make_tls(folder)
        self.pid_file = folder / "slapd.pid"
        self.log_file = folder / "slapd.log"
        self.conf_file = folder / "slapd.conf"
        (folder / "db").mkdir()
        write_slapd_conf(
            self.conf_file,
            folder,
            pid_file=self.pid_file,
            tls=(self.ca_file, self.cert_file, self.key_file),
            root_password=self.root_password,
        )
        write_ldap_conf(folder, self.ca_file)
        self._process = ServerProcess("slapd", self.log_file, pid_file=self.pid_file, tail=2000)

    # ---- the process
    def start(self, timeout: float = 10.0) -> None:
        """Start slapd (again) on the same ports; return once both ports accept."""
        urls = f"{self.ldap_url}/ {self.ldaps_url}/"
        self._process.start(
            [SLAPD, "-d", "0", "-f", str(self.conf_file), "-h", urls, "-n", "slapd-test"],
            ready=lambda: all(port_accepts(self.host, p) for p in (self.port, self.ldaps_port)),
            cwd=self.folder,
            timeout=timeout,
        )

    def stop(self, timeout: float = 10.0) -> None:
        """Stop slapd (SIGTERM, then SIGKILL); the data stays for ``start``."""
        self._process.stop(timeout)

    def restart(self) -> None:
        self.stop()
        self.start()

    def pause(self) -> None:
        """SIGSTOP: the ports still accept TCP connections, but nothing answers (timeouts)."""
        self._process.pause()

    def resume(self) -> None:
        self._process.resume()

    @property
    def running(self) -> bool:
        return self._process.running

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def log_tail(self, n: int = 2000) -> str:
        return self._process.log_tail(n)

    def reset(self) -> None:
        """Back to the seed: starts slapd if a test stopped it, resumes it if paused, drops
        everything under ou=people and ou=groups, adds the seed again, restores svc's password."""
        if self.running:
            self.resume()
        self.start()
        self.restore_seed()

    def close(self) -> None:
        self.stop()


@contextmanager
def start_slapd(seed: bool = True) -> Iterator[SlapdServer]:
    """A running, seeded slapd; stopped and its folder removed afterwards."""
    reason = missing()
    if reason:
        raise RuntimeError(reason)
    with scratch_folder("slapd-test-") as folder, closing(SlapdServer(folder)) as server:
        server.start()
        if seed:
            server.seed()
        yield server
