"""What the tests change in a running test OpenID Provider, through the admin API of
tests/support/oidc/provider.mjs (``/__admin/...``, guarded by the provider's admin token).

* accounts: add, change, disable and delete people, their passwords and groups
* redirect URIs: allow one more, until the provider's reset
* forged and tampered ID tokens: ``keys()`` returns the provider's private JWK and a foreign
  one (same shape, never published), ``sign()`` signs any payload with either (or HS256 with
  the client secret, or ``alg: none``), and ``tamper_next_id_token()`` makes the provider's next
  token response carry a changed ID token
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx


class OidcAdmin:
    """The admin API of the provider at ``issuer``, authorised by ``admin_token``."""

    issuer: str
    admin_token: str

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

    # ---- accounts
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
