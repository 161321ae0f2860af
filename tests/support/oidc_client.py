"""The test OpenID Provider as its one client sees it (oidc_provider.py runs the provider).

The client is ``appliance`` / ``appliance-secret`` with the scopes ``openid profile email groups``.
``OidcClientSide`` gives the provider's endpoints under its ``issuer``, builds an authorization
URL (code flow, PKCE S256), and ``login()`` walks the provider's own sign-in page with an httpx
client, as a browser would, for tests that drive the flow themselves.
"""

from __future__ import annotations

import re
from urllib.parse import urljoin

import httpx

CLIENT_ID = "appliance"
CLIENT_SECRET = "appliance-secret"
SCOPES = "openid profile email groups"


class OidcLoginError(RuntimeError):
    """The provider's sign-in page refused (the message is the page's #error text)."""


class OidcClientSide:
    """The endpoints under ``issuer`` (set once the provider runs) and the client's flow."""

    client_id = CLIENT_ID
    client_secret = CLIENT_SECRET
    scopes = SCOPES
    issuer: str

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
        """The authorization request of the code flow with PKCE (S256) for ``redirect_uri``."""
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
