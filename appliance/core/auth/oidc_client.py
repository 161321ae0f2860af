"""OpenID Connect relying party (the I/O edge): the authorization code flow with PKCE (S256),
``state`` and ``nonce``; authlib builds the request and the PKCE challenge, httpx speaks to the
provider (one client library for every call, so one set of transport errors), joserfc
(authlib's JOSE library) checks the ID token.

What is checked before a sign-in: the discovery document's ``issuer`` is exactly the configured
one; the ID token is signed by a key of the provider's JWKS with an asymmetric algorithm (never
``none`` or a shared-secret HMAC), its ``iss`` is the issuer, its ``aud`` holds our client id
(and ``azp`` is ours when there are several audiences), it has not expired (60 s leeway), and
its ``nonce`` is the one this flow sent. Claims the ID token lacks (a provider may keep groups
for the userinfo endpoint) come from userinfo, whose ``sub`` must be the token's.
"""

from __future__ import annotations

import secrets
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx
from authlib.common.urls import add_params_to_uri
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from appliance.core.directory_config import OidcConfig

ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA")
DISCOVERY_TTL_S = 600.0
# a provider that could not be read is not asked again this soon: a burst of sign-ins while it
# is down would otherwise hold a worker thread each for the whole timeout
FAILURE_TTL_S = 10.0
LEEWAY_S = 60


class OidcError(Exception):
    """The provider's answer cannot sign anyone in; the message says why (for the audit log
    and the admin; the user sees a short form)."""


class ProviderDown(OidcError):
    """The provider could not be reached (discovery, keys or token endpoint)."""


@dataclass(frozen=True)
class Pending:
    """One started sign-in: what the callback must match (kept server-side)."""

    state: str
    nonce: str
    verifier: str
    redirect_uri: str
    next_path: str
    started: float


def _verify(config: OidcConfig) -> ssl.SSLContext | bool:
    return ssl.create_default_context(cafile=config.ca_file) if config.ca_file else True


class OidcClient:
    """One provider (``OidcConfig``): its discovery document and keys are cached."""

    def __init__(self, config: OidcConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._discovery: tuple[float, dict[str, Any]] | None = None
        self._failed: tuple[float, OidcError] | None = None
        self._keys: KeySet | None = None

    def _get(self, url: str) -> dict[str, Any]:
        try:
            with httpx.Client(verify=_verify(self.config), timeout=self.config.timeout_s) as h:
                answer = h.get(url, headers={"Accept": "application/json"})
            answer.raise_for_status()
            data = answer.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise ProviderDown(f"cannot read {url}: {exc}") from exc
        if not isinstance(data, dict):
            raise ProviderDown(f"{url} did not answer a JSON object")
        return data

    def discovery(self) -> dict[str, Any]:
        """The provider's discovery document, checked to name the configured issuer."""
        now = time.monotonic()
        with self._lock:
            if self._discovery and now - self._discovery[0] < DISCOVERY_TTL_S:
                return self._discovery[1]
            if self._failed and now - self._failed[0] < FAILURE_TTL_S:
                raise self._failed[1]
        try:
            doc = self._read_discovery()
        except OidcError as exc:
            with self._lock:
                self._failed = (now, exc)
            raise
        with self._lock:
            self._discovery, self._failed = (now, doc), None
        return doc

    def _read_discovery(self) -> dict[str, Any]:
        issuer = self.config.issuer.rstrip("/")
        doc = self._get(f"{issuer}/.well-known/openid-configuration")
        if doc.get("issuer") != self.config.issuer:
            raise OidcError(
                f"the provider names its issuer {doc.get('issuer')!r}, "
                f"not the configured {self.config.issuer!r}"
            )
        for field in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
            if not isinstance(doc.get(field), str):
                raise OidcError(f"the discovery document has no {field}")
        return doc

    def _key_set(self, refresh: bool = False) -> KeySet:
        if self._keys is None or refresh:
            try:
                self._keys = KeySet.import_key_set(self._get(self.discovery()["jwks_uri"]))  # type: ignore[arg-type]
            except (JoseError, ValueError, TypeError) as exc:
                raise OidcError(f"the provider's JWKS cannot be read: {exc}") from exc
        return self._keys

    def begin(self, redirect_uri: str, next_path: str) -> tuple[Pending, str]:
        """A new sign-in: what to keep, and the provider URL to send the browser to."""
        endpoint = self.discovery()["authorization_endpoint"]
        pending = Pending(
            state=secrets.token_urlsafe(24),
            nonce=secrets.token_urlsafe(24),
            verifier=secrets.token_urlsafe(48),
            redirect_uri=redirect_uri,
            next_path=next_path,
            started=time.monotonic(),
        )
        params = [
            ("response_type", "code"),
            ("client_id", self.config.client_id),
            ("redirect_uri", redirect_uri),
            ("scope", self.config.scopes),
            ("state", pending.state),
            ("nonce", pending.nonce),
            ("code_challenge", create_s256_code_challenge(pending.verifier)),
            ("code_challenge_method", "S256"),
        ]
        return pending, add_params_to_uri(endpoint, params)

    def _exchange(self, http: httpx.Client, endpoint: str, pending: Pending, code: str) -> dict:
        c = self.config
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": pending.redirect_uri,
            "code_verifier": pending.verifier,
        }
        auth = (c.client_id, c.client_secret) if c.client_secret else None
        if auth is None:
            form["client_id"] = c.client_id  # a public client names itself
        answer = http.post(endpoint, data=form, auth=auth, headers={"Accept": "application/json"})
        if answer.status_code >= 500:
            raise ProviderDown(f"the token endpoint answered {answer.status_code}")
        token = answer.json()
        if answer.status_code != 200 or not isinstance(token, dict):
            error = token.get("error") if isinstance(token, dict) else answer.status_code
            raise OidcError(f"the provider refused the code: {error}")
        return token

    def finish(self, pending: Pending, code: str) -> dict[str, Any]:
        """Exchange ``code`` (PKCE) and return the verified claims (see the module)."""
        doc = self.discovery()
        try:
            with httpx.Client(verify=_verify(self.config), timeout=self.config.timeout_s) as http:
                token = self._exchange(http, doc["token_endpoint"], pending, code)
                id_token = token.get("id_token")
                if not isinstance(id_token, str):
                    raise OidcError("the provider sent no ID token")
                claims = self.verify_id_token(id_token, pending.nonce)
                missing = {self.config.username_claim, self.config.groups_claim} - set(claims)
                access = token.get("access_token")
                if missing and isinstance(doc.get("userinfo_endpoint"), str) and access:
                    bearer = {"Authorization": f"Bearer {access}"}
                    info = http.get(doc["userinfo_endpoint"], headers=bearer).json()
                    if not isinstance(info, dict) or info.get("sub") != claims.get("sub"):
                        raise OidcError("userinfo describes another subject")
                    claims = {**info, **claims}
        except httpx.HTTPError as exc:
            raise ProviderDown(f"the token exchange failed: {exc}") from exc
        except ValueError as exc:  # not JSON
            raise OidcError(f"the provider's answer is not JSON: {exc}") from exc
        return claims

    def verify_id_token(self, id_token: str, nonce: str) -> dict[str, Any]:
        """The claims of a valid ID token for this client and ``nonce``, else ``OidcError``."""
        try:
            try:
                token = jwt.decode(id_token, self._key_set(), algorithms=list(ALGORITHMS))
            except JoseError:  # perhaps a key the provider rotated in since we fetched
                token = jwt.decode(id_token, self._key_set(True), algorithms=list(ALGORITHMS))
        except (JoseError, ValueError) as exc:
            raise OidcError(f"the ID token's signature does not verify: {exc}") from exc
        claims = dict(token.claims)
        registry = jwt.JWTClaimsRegistry(
            leeway=LEEWAY_S,
            iss={"essential": True, "value": self.config.issuer},
            sub={"essential": True},
            exp={"essential": True},
            nonce={"essential": True, "value": nonce},
        )
        try:
            registry.validate(claims)
        except JoseError as exc:
            raise OidcError(f"the ID token's claims are refused: {exc}") from exc
        audience = claims.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if self.config.client_id not in audiences:
            raise OidcError("the ID token was issued to another client")
        if len(audiences) > 1 and claims.get("azp") != self.config.client_id:
            raise OidcError("the ID token's authorized party is another client")
        return claims


class PendingStore:
    """Started sign-ins by ``state``, kept in this process for ``ttl_s`` (bounded: the
    oldest go first, so unauthenticated requests cannot grow it without limit)."""

    def __init__(self, ttl_s: float = 600.0, limit: int = 10_000) -> None:
        self.ttl_s = ttl_s
        self.limit = limit
        self._lock = threading.Lock()
        self._items: dict[str, Pending] = {}

    def put(self, pending: Pending) -> None:
        with self._lock:
            self._drop_stale()
            while len(self._items) >= self.limit:
                self._items.pop(next(iter(self._items)))
            self._items[pending.state] = pending

    def take(self, state: str) -> Pending | None:
        """The sign-in ``state`` started, once (a replayed callback finds nothing)."""
        with self._lock:
            self._drop_stale()
            return self._items.pop(state, None)

    def _drop_stale(self) -> None:
        now = time.monotonic()
        for key in [k for k, p in self._items.items() if now - p.started > self.ttl_s]:
            del self._items[key]
