"""A real OpenID Provider for the OIDC sign-in tests: panva's ``oidc-provider`` on Node.js.

``start_oidc_provider()`` runs tests/support/oidc/provider.mjs with the packages that
scripts/directory_test_servers.sh installed (``npm ci``) into .cache/oidc-node. The provider:

* has the issuer ``http://127.0.0.1:<port>`` (plain HTTP on loopback; discovery at
  ``/.well-known/openid-configuration``, keys at ``/jwks``), a fresh RS256 key per provider
  (kept across ``restart``). Cookies ignore ports, so an appliance on 127.0.0.1 and this provider
  are one site to a browser: SameSite=Strict cookies still arrive at the appliance's callback,
  unlike with a real IdP. ``issuer_host="localhost"`` makes the provider another site (it still
  listens on 127.0.0.1 only);
* knows one confidential client: ``appliance`` / ``appliance-secret``, response type ``code``,
  grant type ``authorization_code``, PKCE required (S256 only), client authentication
  ``client_secret_basic`` unless started with ``token_endpoint_auth_method="client_secret_post"``;
  redirect URIs: the exact ``redirect_uris`` given, those added by ``allow_redirect_uri``, and any
  that match ``redirect_uri_patterns`` (``*`` matches within one part of the URL; by default
  ``http://127.0.0.1:*/oidc/callback`` and ``http://localhost:*/oidc/callback``);
* supports the scopes ``openid profile email groups``; the claims (sub, preferred_username, name,
  email, email_verified, groups) go into the ID token as well as to userinfo;
* signs people in on its own page (``/interaction/<uid>``: a form with ``login`` and
  ``password``, ``#login``, ``#password``, ``#submit``) that checks the password against the
  accounts (by username or email); a wrong password gets 401 and ``#error``; consent is given
  at once (first-party client). ``login()`` walks it with an httpx client.

The accounts are seeded from ``directory_seed`` (sub ``sub-<uid>-0001``). A **disabled** account
(``disable_user``) cannot sign in (the page says "This account is disabled.") and the provider no
longer finds it: a code issued before it was disabled fails at the token endpoint
(``invalid_grant``), its access token at userinfo (401), and a browser still signed in as them
is asked to sign in again (with ``prompt=none``: ``error=login_required``). The provider
remembers a signed-in client (its ``_session`` cookie): another ``/auth`` from the same client
skips the sign-in page unless ``prompt=login``; signing in there as someone else ends the old
session first (an auto-submitted form, which ``login()`` submits as a browser would).

For forged and tampered ID tokens: ``keys()`` returns the provider's private JWK and a foreign
one (same shape, never published), ``sign()`` signs any payload with either (or HS256 with the
client secret, or ``alg: none``), and ``tamper_next_id_token()`` makes the provider's next token
response carry a changed ID token, for an end-to-end check of the appliance's validation.

Sessions, codes and tokens live in the node process's memory: ``restart`` loses them (the keys,
the port and the accounts' seed stay; changed accounts go back to the seed).

The parts: oidc_client.py (endpoints, ``authorize_url``, ``login``), oidc_admin.py (accounts,
keys, tampering), processes.py (the node process).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from support.directory_seed import SEED_USERS
from support.oidc_admin import OidcAdmin
from support.oidc_client import CLIENT_ID, CLIENT_SECRET, SCOPES, OidcClientSide, OidcLoginError
from support.paths import REPO
from support.processes import ServerProcess, scratch_folder

__all__ = [
    "CLIENT_ID",
    "CLIENT_SECRET",
    "DEFAULT_POST_LOGOUT_PATTERNS",
    "DEFAULT_REDIRECT_PATTERNS",
    "NODE_DIR",
    "OIDC_DIR",
    "SCOPES",
    "OidcLoginError",
    "OidcProvider",
    "missing",
    "start_oidc_provider",
]

OIDC_DIR = REPO / "tests" / "support" / "oidc"
NODE_DIR = Path(os.environ.get("TEST_OIDC_NODE_DIR", REPO / ".cache" / "oidc-node"))
DEFAULT_REDIRECT_PATTERNS = (
    "http://127.0.0.1:*/oidc/callback",
    "http://localhost:*/oidc/callback",
)
DEFAULT_POST_LOGOUT_PATTERNS = ("http://127.0.0.1:*/*", "http://localhost:*/*")


def _pinned_version() -> str:
    manifest = json.loads((OIDC_DIR / "package.json").read_text())
    return manifest["dependencies"]["oidc-provider"]


def missing() -> str | None:
    """None when node and the pinned oidc-provider are installed, else why not."""
    hint = "run scripts/directory_test_servers.sh"
    if shutil.which("node") is None:
        return f"node (Node.js >= 20) is missing; {hint}"
    installed = NODE_DIR / "node_modules" / "oidc-provider" / "package.json"
    if not installed.exists():
        return f"oidc-provider is not installed in {NODE_DIR}; {hint}"
    version = json.loads(installed.read_text()).get("version")
    if version != _pinned_version():
        return f"{NODE_DIR} has oidc-provider {version}, not {_pinned_version()}; {hint}"
    if not (NODE_DIR / "node_modules" / "jose" / "package.json").exists():
        return f"jose is not installed in {NODE_DIR}; {hint}"
    return None


def _seed_accounts() -> list[dict[str, Any]]:
    return [
        {
            "username": u.uid,
            "sub": u.sub,
            "password": u.password,
            "name": u.cn,
            "email": u.mail,
            "groups": list(u.groups),
            "disabled": False,
        }
        for u in SEED_USERS
    ]


class OidcProvider(OidcAdmin, OidcClientSide):
    """One oidc-provider process. Use ``start_oidc_provider()``; see the module docstring. Its
    endpoints and the client's flow come from ``OidcClientSide``, the admin API (accounts,
    keys, tampering) from ``OidcAdmin``."""

    def __init__(
        self,
        folder: Path,
        redirect_uris: Iterable[str] = (),
        redirect_uri_patterns: Iterable[str] = DEFAULT_REDIRECT_PATTERNS,
        post_logout_redirect_uri_patterns: Iterable[str] = DEFAULT_POST_LOGOUT_PATTERNS,
        token_endpoint_auth_method: str = "client_secret_basic",
        issuer_host: str = "127.0.0.1",
    ) -> None:
        self.folder = folder
        self.admin_token = secrets.token_urlsafe(16)
        self.port = 0
        self.issuer = ""
        self.log_file = folder / "provider.log"
        self.redirect_uris = list(redirect_uris)
        self.redirect_uri_patterns = list(redirect_uri_patterns)
        self._config = {
            "state_dir": str(folder),
            "issuer_host": issuer_host,
            "admin_token": self.admin_token,
            "client": {
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                # oidc-provider wants one registered URI; the patterns do the rest
                "redirect_uris": self.redirect_uris or ["http://127.0.0.1/oidc/callback"],
                "post_logout_redirect_uris": ["http://127.0.0.1/"],
                "token_endpoint_auth_method": token_endpoint_auth_method,
            },
            "redirect_uri_patterns": self.redirect_uri_patterns,
            "post_logout_redirect_uri_patterns": list(post_logout_redirect_uri_patterns),
            "accounts": _seed_accounts(),
        }
        self._process = ServerProcess("oidc-provider", self.log_file, tail=3000)

    # ---- the process
    def start(self, timeout: float = 20.0) -> None:
        if self.running:
            return
        self._config["port"] = self.port
        config = self.folder / "config.json"
        config.write_text(json.dumps(self._config))
        # ESM resolves packages from the script's own folder: run a copy next to node_modules
        script = NODE_DIR / "provider.mjs"
        tmp = NODE_DIR / f".provider.{os.getpid()}.mjs"
        shutil.copyfile(OIDC_DIR / "provider.mjs", tmp)
        os.replace(tmp, script)
        out = self.folder / "stdout.log"
        out.write_text("")
        self._process.start(
            ["node", str(script), str(config)],
            ready=lambda: self._ready(out),
            cwd=NODE_DIR,
            timeout=timeout,
            env={**os.environ, "NODE_ENV": "development"},
            stdout=out,
            stdin=subprocess.PIPE,  # the provider exits when this closes
        )

    def _ready(self, out: Path) -> bool:
        """Whether the provider printed its ready line; it sets ``issuer`` and ``port``."""
        for line in out.read_text().splitlines():
            if line.startswith('{"issuer"'):
                ready = json.loads(line)
                self.issuer, self.port = ready["issuer"], ready["port"]
                return True
        return False

    def stop(self, timeout: float = 10.0) -> None:
        self._process.stop(timeout)

    def restart(self) -> None:
        self.stop()
        self.start()

    @property
    def running(self) -> bool:
        return self._process.running

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def log(self, n: int = 3000) -> str:
        return self._process.log_tail(n)

    def close(self) -> None:
        self.stop()

    def reset(self) -> None:
        """Back to the seed accounts, no extra redirect URIs, no pending tampering; starts the
        provider if a test stopped it. Sessions already made stay (new clients have none)."""
        self.start()
        self._admin("POST", "reset")


@contextmanager
def start_oidc_provider(
    redirect_uris: Iterable[str] = (),
    redirect_uri_patterns: Iterable[str] = DEFAULT_REDIRECT_PATTERNS,
    **options: Any,  # noqa: ANN401
) -> Iterator[OidcProvider]:
    """A running provider (see ``OidcProvider``); stopped and its folder removed afterwards."""
    reason = missing()
    if reason:
        raise RuntimeError(reason)
    with (
        scratch_folder("oidc-test-") as folder,
        closing(OidcProvider(folder, redirect_uris, redirect_uri_patterns, **options)) as provider,
    ):
        provider.start()
        yield provider
