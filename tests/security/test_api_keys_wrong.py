"""Wrong API keys were neither throttled (19 a second) nor audited, and re-enabling a user
brought their old API keys back. Now invalid keys on ``/v1`` are audited and, past
login_max_failures from one client address, refused with ``Retry-After`` (and no more audit
rows) while valid keys from that address still work; and disabling a user revokes their keys.
On each database, through the real app."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from appliance.core.db.models import AuditEvent

PASSWORD = "password-789"
MAX_FAILURES = 5  # security.login_max_failures (the default)


@pytest.fixture(params=["sqlite", "postgresql"])
def served(request: pytest.FixtureRequest, own_site) -> Callable[..., Any]:  # noqa: ANN001
    """``with served() as s``: a site of its own, on each database."""
    if request.param == "sqlite":
        return lambda: own_site(security={})
    pg_url = request.getfixturevalue("pg_url")
    return lambda: own_site(database={"url": pg_url})


def _client(site, address: str = "127.0.0.1") -> httpx.Client:  # noqa: ANN001
    transport = httpx.HTTPTransport(local_address=address)
    return httpx.Client(base_url=site.base, transport=transport, timeout=60)


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def _login(site, username: str) -> dict[str, str]:  # noqa: ANN001
    with _client(site) as client:
        answer = client.post("/api/login", json={"username": username, "password": PASSWORD})
    assert answer.status_code == 200, answer.text
    return _bearer(answer.json()["token"])


def _user_with_key(site) -> tuple[str, str]:  # noqa: ANN001
    name = f"key-{secrets.token_hex(3)}"
    site.auth.create_user(name, PASSWORD)
    with _client(site) as client:
        made = client.post("/api/keys", json={"name": "laptop"}, headers=_login(site, name))
    assert made.status_code == 200, made.text
    return name, made.json()["key"]


def _failed_keys(site) -> list[dict]:  # noqa: ANN001
    with site.appliance.db.session() as s:
        query = select(AuditEvent.detail).where(AuditEvent.action == "login.api_key.failed")
        return list(s.scalars(query.order_by(AuditEvent.id)))


def test_wrong_api_keys_are_audited_and_throttled_per_address(served) -> None:  # noqa: ANN001
    """20 made-up keys from one address: the first login_max_failures get 401 and an audit
    row each, the rest 429 with Retry-After and no row; a valid key from the same address
    still works, and another address's wrong key is still answered 401 (before: 20 x 401,
    nothing audited)."""
    with served() as site:
        _, key = _user_with_key(site)
        with _client(site, "127.0.0.51") as guesser:
            answers = [
                guesser.get("/v1/models", headers=_bearer(f"sk-{secrets.token_urlsafe(32)}"))
                for _ in range(20)
            ]
            codes = [a.status_code for a in answers]
            assert codes == [401] * MAX_FAILURES + [429] * (20 - MAX_FAILURES)
            refused = answers[-1]
            assert int(refused.headers["retry-after"]) >= 1
            assert refused.json()["error"]["type"] == "rate_limit_exceeded"
            assert guesser.get("/v1/models", headers=_bearer(key)).status_code == 200
        audited = _failed_keys(site)
        assert [a["client"] for a in audited] == ["127.0.0.51"] * MAX_FAILURES
        with _client(site, "127.0.0.52") as other:
            assert other.get("/v1/models", headers=_bearer("sk-wrong")).status_code == 401


def test_re_enabling_a_user_does_not_bring_their_old_api_key_back(served) -> None:  # noqa: ANN001
    """An admin disables a user, then enables them again: the key they had stays dead (before:
    it worked again); a key made after works."""
    with served() as site:
        name, key = _user_with_key(site)
        admin = _login(site, "root")
        with _client(site) as client:
            assert client.get("/v1/models", headers=_bearer(key)).status_code == 200
            for disabled in (True, False):
                patched = client.patch(
                    f"/api/admin/users/{name}", json={"disabled": disabled}, headers=admin
                )
                assert patched.status_code == 200, patched.text
            assert client.get("/v1/models", headers=_bearer(key)).status_code == 401
            made = client.post("/api/keys", json={"name": "new"}, headers=_login(site, name))
            new = made.json()["key"]
            assert client.get("/v1/models", headers=_bearer(new)).status_code == 200
