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
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx

from support.directory_seed import SEED_USERS
from support.paths import REPO

OIDC_DIR = REPO / "tests" / "support" / "oidc"
NODE_DIR = Path(os.environ.get("TEST_OIDC_NODE_DIR", REPO / ".cache" / "oidc-node"))
CLIENT_ID = "appliance"
CLIENT_SECRET = "appliance-secret"
SCOPES = "openid profile email groups"
DEFAULT_REDIRECT_PATTERNS = (
    "http://127.0.0.1:*/oidc/callback",
    "http://localhost:*/oidc/callback",
)
DEFAULT_POST_LOGOUT_PATTERNS = ("http://127.0.0.1:*/*", "http://localhost:*/*")


class OidcLoginError(RuntimeError):
    """The provider's sign-in page refused (the message is the page's #error text)."""


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


def _die_with_parent() -> None:  # runs in the child before exec
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


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


class OidcProvider:
    """One oidc-provider process. Use ``start_oidc_provider()``; see the module docstring."""

    client_id = CLIENT_ID
    client_secret = CLIENT_SECRET
    scopes = SCOPES

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
        self._proc: subprocess.Popen | None = None

    # ---- addresses (fixed once started: a restart keeps the port)
    @property
    def discovery_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"

    @property
    def jwks_uri(self) -> str:
        return f"{self.issuer}/jwks"

    @property
    def authorization_endpoint(self) -> str:
        return f"{self.issuer}/auth"

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/token"

    @property
    def userinfo_endpoint(self) -> str:
        return f"{self.issuer}/me"

    @property
    def end_session_endpoint(self) -> str:
        return f"{self.issuer}/session/end"

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
        with out.open("ab") as stdout, self.log_file.open("ab") as stderr:
            self._proc = subprocess.Popen(
                ["node", str(script), str(config)],
                stdin=subprocess.PIPE,  # the provider exits when this closes
                stdout=stdout,
                stderr=stderr,
                cwd=NODE_DIR,
                env={**os.environ, "NODE_ENV": "development"},
                preexec_fn=_die_with_parent,
            )
        deadline = time.monotonic() + timeout
        while True:
            for line in out.read_text().splitlines():
                if line.startswith('{"issuer"'):
                    ready = json.loads(line)
                    self.issuer, self.port = ready["issuer"], ready["port"]
                    return
            if self._proc.poll() is not None:
                raise RuntimeError(
                    f"oidc-provider exited with {self._proc.returncode}: {self.log()}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"oidc-provider did not start in {timeout} s: {self.log()}")
            time.sleep(0.02)

    def stop(self, timeout: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if proc.stdin:
            proc.stdin.close()

    def restart(self) -> None:
        self.stop()
        self.start()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.running else None

    def log(self, n: int = 3000) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def close(self) -> None:
        self.stop()

    # ---- the admin API of provider.mjs
    def _admin(self, method: str, path: str, body: dict | None = None) -> Any:  # noqa: ANN401
        r = httpx.request(
            method,
            f"{self.issuer}/__admin/{path}",
            json=body,
            headers={"X-Admin-Token": self.admin_token},
            timeout=10,
        )
        r.raise_for_status()
        return r.json()

    def reset(self) -> None:
        """Back to the seed accounts, no extra redirect URIs, no pending tampering; starts the
        provider if a test stopped it. Sessions already made stay (new clients have none)."""
        self.start()
        self._admin("POST", "reset")

    def state(self) -> dict:
        return self._admin("GET", "state")

    def account(self, username: str) -> dict | None:
        return self.state()["accounts"].get(username)

    def set_account(self, username: str, **fields: Any) -> dict:  # noqa: ANN401
        """Create or change an account: password, name, email, groups, disabled, sub."""
        return self._admin("PUT", f"accounts/{username}", fields)

    def add_user(
        self,
        username: str,
        password: str,
        name: str | None = None,
        email: str | None = None,
        *,
        groups: Iterable[str] = (),
        sub: str | None = None,
        disabled: bool = False,
    ) -> dict:
        fields = {
            "password": password,
            "name": name or username.title(),
            "email": email or f"{username}@example.com",
            "groups": list(groups),
            "disabled": disabled,
        }
        if sub:
            fields["sub"] = sub
        return self.set_account(username, **fields)

    def delete_user(self, username: str) -> None:
        self._admin("DELETE", f"accounts/{username}")

    def set_groups(self, username: str, groups: Iterable[str]) -> None:
        self.set_account(username, groups=list(groups))

    def add_to_group(self, username: str, group: str) -> None:
        groups = self.account(username)["groups"]
        if group not in groups:
            self.set_groups(username, [*groups, group])

    def remove_from_group(self, username: str, group: str) -> None:
        self.set_groups(username, [g for g in self.account(username)["groups"] if g != group])

    def set_password(self, username: str, password: str) -> None:
        self.set_account(username, password=password)

    def disable_user(self, username: str) -> None:
        self.set_account(username, disabled=True)

    def enable_user(self, username: str) -> None:
        self.set_account(username, disabled=False)

    def allow_redirect_uri(self, uri: str) -> None:
        """Allow one more exact redirect URI (until ``reset``)."""
        self._admin("POST", "redirect_uris", {"uri": uri})

    # ---- keys and tokens
    def keys(self) -> dict[str, dict]:
        """{"provider": the provider's private RSA JWK (kid, alg RS256), "foreign": another}."""
        return self._admin("GET", "keys")

    def sign(self, payload: dict, *, signer: str = "provider", header: dict | None = None) -> str:
        """A compact JWT of ``payload``. signer: "provider" (its key and kid), "foreign" (another
        RSA key, with the provider's kid unless ``header`` says otherwise), "hs256" (HMAC with the
        client secret), "none" (alg none, no signature)."""
        body = {"payload": payload, "signer": signer, "header": header or {}}
        return self._admin("POST", "sign", body)["jwt"]

    def tamper_next_id_token(
        self,
        claims: dict | None = None,
        *,
        signer: str = "provider",
        header: dict | None = None,
        count: int = 1,
    ) -> None:
        """Change the ID token of the next ``count`` token responses: ``claims`` replace the real
        ones (None deletes a claim), then it is signed by ``signer`` as in ``sign``, or "keep":
        the original signature over the changed payload (a tampered token)."""
        spec = {"claims": claims or {}, "signer": signer, "header": header or {}, "count": count}
        self._admin("POST", "tamper", spec)

    # ---- a client's side, for tests that drive the flow themselves
    def authorize_url(
        self,
        redirect_uri: str,
        *,
        state: str,
        nonce: str,
        code_challenge: str,
        scope: str = SCOPES,
        **extra: str,
    ) -> str:
        params = {
            "client_id": CLIENT_ID,
            "response_type": "code",
            "redirect_uri": redirect_uri,
            "scope": scope,
            "state": state,
            "nonce": nonce,
            "code_challenge": code_challenge,
            "code_challenge_method": "S256",
            **extra,
        }
        return str(httpx.URL(self.authorization_endpoint, params=params))

    def login(self, http: httpx.Client, authorize_url: str, username: str, password: str) -> str:
        """Walk the provider from ``authorize_url`` (the URL the appliance redirected to)
        through its sign-in page as ``username``; return the first URL outside the provider
        (the redirect back with ``code`` and ``state``, or with ``error``) without fetching it.
        Raises OidcLoginError when the sign-in page refuses the password or the account."""
        url, method, data = authorize_url, "GET", None
        for _ in range(12):
            if not url.startswith(self.issuer + "/"):
                return url
            r = http.request(method, url, data=data, follow_redirects=False)
            method, data = "GET", None
            if r.is_redirect:
                url = urljoin(str(r.url), r.headers["location"])
                continue
            if r.status_code == 401 and 'id="error"' in r.text:
                message = re.search(r'id="error"[^>]*>([^<]*)<', r.text)
                raise OidcLoginError(message.group(1) if message else r.text)
            action = re.search(r'<form id="login-form" method="post" action="([^"]+)"', r.text)
            if r.status_code == 200 and action:
                url = urljoin(str(r.url), action.group(1))
                method, data = "POST", {"login": username, "password": password}
                continue
            auto = re.search(r'<form method="post" action="([^"]+)">(.*?)</form>', r.text, re.S)
            if r.status_code == 200 and auto and "forms[0].submit()" in r.text:
                # what a browser's script does: a sign-in as someone else ends the old session
                url = urljoin(str(r.url), auto.group(1))
                fields = re.findall(r'name="([^"]+)" value="([^"]*)"', auto.group(2))
                method, data = "POST", dict(fields)
                continue
            raise OidcLoginError(f"unexpected answer {r.status_code} from {r.url}: {r.text[:500]}")
        raise OidcLoginError("too many redirects at the provider")


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
    folder = Path(tempfile.mkdtemp(prefix="oidc-test-"))
    provider = None
    try:
        provider = OidcProvider(folder, redirect_uris, redirect_uri_patterns, **options)
        provider.start()
        yield provider
    finally:
        if provider is not None:
            provider.close()
        shutil.rmtree(folder, ignore_errors=True)
