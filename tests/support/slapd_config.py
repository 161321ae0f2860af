"""The files a test slapd runs from, and the names in its directory.

* the installed parts it needs (``SLAPD``, ``LDAP_TOOLS``, ``SCHEMA_DIR``, ``MODULE_DIR``)
* the directory's layout and accounts (``BASE_DN``, ``PEOPLE_DN``, ``SVC_DN`` ...; ``user_dn``)
* ``make_tls``: a CA and a server certificate for 127.0.0.1 and localhost (openssl)
* ``write_slapd_conf``: slapd.conf for an mdb database with the memberof overlay
* ``write_ldap_conf``: ldap.conf for the command line tools, trusting that CA
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
from pathlib import Path

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


def user_dn(uid: str) -> str:
    """The DN of the person ``uid`` (under ou=people)."""
    return f"uid={uid},{PEOPLE_DN}"


def group_dn(cn: str) -> str:
    """The DN of the group ``cn`` (under ou=groups)."""
    return f"cn={cn},{GROUPS_DN}"


def ssha(password: str) -> str:
    """``password`` as a salted SHA-1 userPassword value (``{SSHA}...``)."""
    salt = os.urandom(8)
    digest = hashlib.sha1(password.encode() + salt).digest()
    return "{SSHA}" + base64.b64encode(digest + salt).decode()


def make_tls(folder: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for 127.0.0.1 and localhost, made with openssl in
    ``folder``: the paths of the CA certificate, the server certificate and its key."""
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


def write_slapd_conf(
    conf_file: Path,
    folder: Path,
    *,
    pid_file: Path,
    tls: tuple[Path, Path, Path],
    root_password: str,
) -> None:
    """slapd.conf for ``BASE_DN`` in ``folder/db`` (mdb, memberof overlay), TLS from ``tls``
    (CA, certificate, key as ``make_tls`` returns them), ``ROOT_DN`` with ``root_password``.
    People may change their own password; signed-in users read everything, anonymous nothing."""
    ca_file, cert_file, key_file = tls
    schemas = "\n".join(
        f"include {SCHEMA_DIR / n}.schema" for n in ("core", "cosine", "inetorgperson", "nis")
    )
    conf_file.write_text(
        f"""{schemas}
modulepath {MODULE_DIR}
moduleload back_mdb
moduleload memberof
pidfile {pid_file}
argsfile {folder / "slapd.args"}
loglevel none
TLSCACertificateFile {ca_file}
TLSCertificateFile {cert_file}
TLSCertificateKeyFile {key_file}
TLSVerifyClient never

database mdb
suffix "{BASE_DN}"
rootdn "{ROOT_DN}"
rootpw {ssha(root_password)}
directory {folder / "db"}
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


def write_ldap_conf(folder: Path, ca_file: Path) -> Path:
    """``folder/ldap.conf`` for ldap-utils: TLS verified against ``ca_file``."""
    path = folder / "ldap.conf"
    path.write_text(f"TLS_CACERT {ca_file}\nTLS_REQCERT demand\n")
    return path
