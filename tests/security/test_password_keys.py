"""Issue #22: a password reset left the user's API keys working, so whoever had learnt the old
password kept a way in; and users could not change their own password at all. Now an admin's
reset revokes the keys (and ends the sessions) and says so; ``POST /api/password`` and the
chat page's form change one's own password, keep the keys and end the other sessions."""

from __future__ import annotations

import secrets

import httpx
import pytest
from sqlalchemy import select

from appliance.bench.load_browser import open_chat
from appliance.core.db.models import AuditEvent

PASSWORD = "password-789"


def _login(site, username: str, password: str = PASSWORD) -> dict:  # noqa: ANN001
    answer = httpx.post(
        f"{site.base}/api/login", json={"username": username, "password": password}, timeout=60
    )
    assert answer.status_code == 200, answer.text
    return {"authorization": f"Bearer {answer.json()['token']}"}


def _user_with_key(site) -> tuple[str, str]:  # noqa: ANN001
    """A fresh staff user and an API key they made (through the API)."""
    name = f"pwk-{secrets.token_hex(3)}"
    site.auth.create_user(name, PASSWORD)
    made = httpx.post(f"{site.base}/api/keys", json={"name": "laptop"}, headers=_login(site, name))
    assert made.status_code == 200, made.text
    return name, made.json()["key"]


def _works(site, headers: dict, path: str) -> bool:  # noqa: ANN001
    return httpx.get(f"{site.base}{path}", headers=headers, timeout=60).status_code == 200


def _key(key: str) -> dict:
    return {"authorization": f"Bearer {key}"}


def _audited(site, action: str, actor: str) -> list[dict]:  # noqa: ANN001
    with site.appliance.db.session() as s:
        return list(
            s.scalars(
                select(AuditEvent.detail).where(
                    AuditEvent.action == action, AuditEvent.actor == actor
                )
            )
        )


def test_an_admin_reset_revokes_the_users_api_keys_and_says_so(site) -> None:  # noqa: ANN001
    """After an admin resets the password, the user's API key and session no longer work, the
    answer says how many of each ended, and the audit log records it (before: the key still
    worked and nothing said so)."""
    name, key = _user_with_key(site)
    session = _login(site, name)
    assert _works(site, _key(key), "/v1/models") and _works(site, session, "/api/me")
    reset = httpx.post(
        f"{site.base}/api/admin/users/{name}/password", json={}, headers=_login(site, "root")
    )
    assert reset.status_code == 200, reset.text
    body = reset.json()
    assert body["api_keys_revoked"] == 1 and body["sessions_ended"] == 2  # two logins above
    assert not _works(site, _key(key), "/v1/models")
    assert not _works(site, session, "/api/me")
    assert _works(site, _login(site, name, body["password"]), "/api/me")
    detail = {"username": name, "sessions_ended": 2, "api_keys_revoked": 1}
    assert _audited(site, "admin.user.password", "root")[-1] == detail


def test_changing_ones_own_password_keeps_api_keys_and_ends_other_sessions(site) -> None:  # noqa: ANN001
    """POST /api/password with the session token: the key keeps working, this session stays,
    the user's other session ends, and the new password signs in; a wrong current password
    is refused (before: there was no such route)."""
    name, key = _user_with_key(site)
    here, there = _login(site, name), _login(site, name)
    url = f"{site.base}/api/password"
    wrong = {"current_password": "not-it-at-all", "new_password": "fresh-password-1"}
    refused = httpx.post(url, json=wrong, headers=here)
    assert refused.status_code == 400 and "current password is wrong" in refused.text
    assert httpx.post(url, json=wrong, headers=_key(key)).status_code == 401  # sessions only
    body = {"current_password": PASSWORD, "new_password": "fresh-password-1"}
    changed = httpx.post(url, json=body, headers=here)
    assert changed.status_code == 200, changed.text
    assert changed.json()["other_sessions_ended"] == 2  # ``there`` and _user_with_key's login
    assert _works(site, here, "/api/me") and not _works(site, there, "/api/me")
    assert _works(site, _key(key), "/v1/models")
    assert _works(site, _login(site, name, "fresh-password-1"), "/api/me")
    assert _audited(site, "user.password", name)[-1]["sessions_ended"] == 2
    assert len(_audited(site, "user.password.failed", name)) == 1


@pytest.mark.browser
def test_the_chat_pages_change_password_form(site, browser) -> None:  # noqa: ANN001
    """The keys panel's form changes the password, saying the API keys keep working; the key
    still works and the new password signs in."""
    name, key = _user_with_key(site)
    page = open_chat(browser, site.base, name, PASSWORD)
    try:
        page.locator("#api-keys").get_by_text("API keys").first.click()
        note = page.locator("#password-note")
        note.wait_for(timeout=30_000)
        assert "API keys keep working" in note.inner_text()
        page.locator("#current-password input").fill(PASSWORD)
        page.locator("#new-password input").fill("browser-password-2")
        page.locator("#change-password").click()
        page.locator("#password-status").get_by_text("Password changed").wait_for(timeout=30_000)
    finally:
        page.context.close()
    assert _works(site, _key(key), "/v1/models")
    assert _works(site, _login(site, name, "browser-password-2"), "/api/me")
