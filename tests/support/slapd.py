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
"""

from __future__ import annotations

import base64
import ctypes
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from support.directory_seed import NESTED_GROUPS, SEED_GROUPS, SEED_USERS

SLAPD = os.environ.get("TEST_SLAPD", "/usr/sbin/slapd")
LDAP_TOOLS = ("ldapadd", "ldapmodify", "ldapsearch", "ldapdelete")
SCHEMA_DIR = Path("/etc/ldap/schema")
MODULE_DIR = Path("/usr/lib/ldap")

BASE_DN = "dc=example,dc=com"
PEOPLE_DN = f"ou=people,{BASE_DN}"
GROUPS_DN = f"ou=groups,{BASE_DN}"
ROOT_DN = f"cn=admin,{BASE_DN}"
SVC_DN = f"cn=svc,{BASE_DN}"
SVC_PASSWORD = "svc-secret"
EMPTY_MEMBER = f"cn=empty-group-placeholder,{BASE_DN}"
DISABLED = "disabled"  # the employeeType value of a disabled user
USER_FILTER = "(&(objectClass=inetOrgPerson)(uid={username})(!(employeeType=disabled)))"


class LdapToolError(RuntimeError):
    def __init__(self, tool: str, rc: int, output: str) -> None:
        super().__init__(f"{tool} failed with LDAP result {rc}: {output.strip()}")
        self.rc = rc


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


def ssha(password: str) -> str:
    salt = os.urandom(8)
    digest = hashlib.sha1(password.encode() + salt).digest()
    return "{SSHA}" + base64.b64encode(digest + salt).decode()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # runs in the child before exec
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _ldif_value(name: str, value: str) -> str:
    if value and (value[0] in " :<" or value[-1] == " " or not value.isascii() or "\n" in value):
        return f"{name}:: {base64.b64encode(value.encode()).decode()}"
    return f"{name}: {value}"


def _make_tls(folder: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for 127.0.0.1 and localhost, made with openssl."""
    ca_key, ca, key, csr, cert = (
        folder / n for n in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem")
    )
    ext = folder / "server.ext"
    ext.write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"
    )
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    steps = [
        ["req", "-x509", *ec, "-keyout", ca_key, "-out", ca, "-days", "2"]
        + ["-subj", "/CN=Appliance Test LDAP CA", "-addext", "basicConstraints=critical,CA:TRUE"]
        + ["-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        ["req", *ec, "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1"],
        ["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial"]
        + ["-out", cert, "-days", "2", "-extfile", ext],
    ]
    for step in steps:
        subprocess.run(["openssl", *map(str, step)], check=True, capture_output=True)
    return ca, cert, key


class SlapdServer:
    """One slapd in its own folder. Use ``start_slapd()``; see the module docstring."""

    base_dn = BASE_DN
    people_dn = PEOPLE_DN
    groups_dn = GROUPS_DN
    bind_dn = SVC_DN
    bind_password = SVC_PASSWORD
    root_dn = ROOT_DN
    user_filter = USER_FILTER
    host = "127.0.0.1"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.root_password = base64.urlsafe_b64encode(os.urandom(12)).decode()
        self.port = _free_port()
        self.ldaps_port = _free_port()
        self.ca_file, self.cert_file, self.key_file = _make_tls(folder)
        self.pid_file = folder / "slapd.pid"
        self.log_file = folder / "slapd.log"
        self.conf_file = folder / "slapd.conf"
        (folder / "db").mkdir()
        self._write_conf()
        (folder / "ldap.conf").write_text(f"TLS_CACERT {self.ca_file}\nTLS_REQCERT demand\n")
        self._proc: subprocess.Popen | None = None

    # ---- addresses
    @property
    def ldap_url(self) -> str:
        return f"ldap://{self.host}:{self.port}"

    @property
    def ldaps_url(self) -> str:
        return f"ldaps://{self.host}:{self.ldaps_port}"

    def user_dn(self, uid: str) -> str:
        return f"uid={uid},{PEOPLE_DN}"

    def group_dn(self, cn: str) -> str:
        return f"cn={cn},{GROUPS_DN}"

    # ---- the process
    def _write_conf(self) -> None:
        f = self.folder
        schemas = "\n".join(
            f"include {SCHEMA_DIR / n}.schema" for n in ("core", "cosine", "inetorgperson", "nis")
        )
        self.conf_file.write_text(
            f"""{schemas}
modulepath {MODULE_DIR}
moduleload back_mdb
moduleload memberof
pidfile {self.pid_file}
argsfile {f / "slapd.args"}
loglevel none
TLSCACertificateFile {self.ca_file}
TLSCertificateFile {self.cert_file}
TLSCertificateKeyFile {self.key_file}
TLSVerifyClient never

database mdb
suffix "{BASE_DN}"
rootdn "{ROOT_DN}"
rootpw {ssha(self.root_password)}
directory {f / "db"}
maxsize 67108864
dbnosync
index objectClass eq
index uid,mail,cn eq
index member eq

overlay memberof
memberof-group-oc groupOfNames
memberof-member-ad member
memberof-memberof-ad memberOf
memberof-refint TRUE

access to attrs=userPassword
    by self write
    by anonymous auth
    by * none
access to *
    by users read
    by * none
"""
        )

    def start(self, timeout: float = 10.0) -> None:
        """Start slapd (again) on the same ports; return once both ports accept."""
        if self.running:
            return
        urls = f"{self.ldap_url}/ {self.ldaps_url}/"
        log = self.log_file.open("ab")
        cmd = [SLAPD, "-d", "0", "-f", str(self.conf_file), "-h", urls, "-n", "slapd-test"]
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd=self.folder,
            preexec_fn=_die_with_parent,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while not (self._accepts(self.port) and self._accepts(self.ldaps_port)):
            if self._proc.poll() is not None:
                raise RuntimeError(f"slapd exited with {self._proc.returncode}: {self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"slapd did not start in {timeout} s: {self.log_tail()}")
            time.sleep(0.02)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop slapd (SIGTERM, then SIGKILL); the data stays for ``start``."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            with suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)  # a paused slapd cannot stop
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self.pid_file.unlink(missing_ok=True)

    def restart(self) -> None:
        self.stop()
        self.start()

    def pause(self) -> None:
        """SIGSTOP: the ports still accept TCP connections, but nothing answers (timeouts)."""
        assert self._proc is not None, "slapd is not running"
        os.kill(self._proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self._proc is not None, "slapd is not running"
        os.kill(self._proc.pid, signal.SIGCONT)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.running else None

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def _accepts(self, port: int) -> bool:
        try:
            with socket.create_connection((self.host, port), timeout=0.2):
                return True
        except OSError:
            return False

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
        return _parse_ldif(out)

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
            _ldif_value("uid", uid),
            _ldif_value("cn", cn),
            _ldif_value("sn", cn.split()[-1]),
            _ldif_value("mail", mail or f"{uid}@example.com"),
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
        lines = [f"dn: {self.group_dn(cn)}", "objectClass: groupOfNames", _ldif_value("cn", cn)]
        lines += [_ldif_value("member", dn) for dn in dns]
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
            f"{_ldif_value('member', dn)}\n"
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
            change = f"delete: member\n{_ldif_value('member', dn)}\n"
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
        lines += [_ldif_value(name, v) for v in values]
        self.modify("\n".join(lines) + "\n")

    # ---- the seed
    def seed_ldif(self) -> str:
        def entry(*lines: str) -> str:
            return "\n".join(lines) + "\n"

        entries = [
            entry(f"dn: {PEOPLE_DN}", "objectClass: organizationalUnit", "ou: people"),
            entry(f"dn: {GROUPS_DN}", "objectClass: organizationalUnit", "ou: groups"),
        ]
        for u in SEED_USERS:
            entries.append(
                entry(
                    f"dn: {self.user_dn(u.uid)}",
                    "objectClass: inetOrgPerson",
                    f"uid: {u.uid}",
                    f"cn: {u.cn}",
                    f"sn: {u.cn.split()[-1]}",
                    f"mail: {u.mail}",
                    f"userPassword: {ssha(u.password)}",
                )
            )
        for g in SEED_GROUPS:
            members = [self.user_dn(u.uid) for u in SEED_USERS if g in u.groups] or [EMPTY_MEMBER]
            entries.append(
                entry(
                    f"dn: {self.group_dn(g)}",
                    "objectClass: groupOfNames",
                    f"cn: {g}",
                    *(f"member: {m}" for m in members),
                )
            )
        for g, children in NESTED_GROUPS.items():
            entries.append(
                entry(
                    f"dn: {self.group_dn(g)}",
                    "objectClass: groupOfNames",
                    f"cn: {g}",
                    *(f"member: {self.group_dn(c)}" for c in children),
                )
            )
        return "\n".join(entries)

    def seed(self) -> None:
        """The base entry, the service account and the seed people and groups."""
        base = (
            f"dn: {BASE_DN}\nobjectClass: dcObject\nobjectClass: organization\n"
            "dc: example\no: Example\n\n"
            f"dn: {SVC_DN}\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\n"
            f"cn: svc\nuserPassword: {ssha(SVC_PASSWORD)}\n"
        )
        self.modify(base + "\n" + self.seed_ldif(), add=True)

    def reset(self) -> None:
        """Back to the seed: starts slapd if a test stopped it, resumes it if paused, drops
        everything under ou=people and ou=groups, adds the seed again, restores svc's password."""
        if self._proc is not None and self._proc.poll() is None:
            os.kill(self._proc.pid, signal.SIGCONT)
        self.start()
        for ou in (GROUPS_DN, PEOPLE_DN):  # groups first: memberOf follows, no empty groups
            with suppress(LdapToolError):
                self._tool("ldapdelete", ["-r", ou])
        self.modify(self.seed_ldif(), add=True)
        self._replace(SVC_DN, "userPassword", ssha(SVC_PASSWORD))

    def close(self) -> None:
        self.stop()


_ATTR = re.compile(r"^([A-Za-z0-9;.-]+)(::?) ?(.*)$")


def _parse_ldif(text: str) -> list[dict[str, list[str]]]:
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


@contextmanager
def start_slapd(seed: bool = True) -> Iterator[SlapdServer]:
    """A running, seeded slapd; stopped and its folder removed afterwards."""
    reason = missing()
    if reason:
        raise RuntimeError(reason)
    folder = Path(tempfile.mkdtemp(prefix="slapd-test-"))
    server = None
    try:
        server = SlapdServer(folder)
        server.start()
        if seed:
            server.seed()
        yield server
    finally:
        if server is not None:
            server.close()
        shutil.rmtree(folder, ignore_errors=True)
