"""Company sign-in over HTTP and in a real browser: LDAP through the login form and
``/api/login``, OIDC through ``/oidc/login`` and ``/oidc/callback`` against a real OpenID
Provider (oidc-provider on Node) and a real slapd. Every refusal (wrong state, replayed or
tampered ID token, unknown issuer, no admitted group, a name that is a local account's, a
provider or directory that is down) answers a page that says so, writes an audit line and
creates no session; nothing answers 500."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
import pytest
from sqlalchemy import select, update

from appliance.core.db.models import AuditEvent, User

SESSION = "appliance_session"
PASSWORD = "password-789"  # the local accounts of own_site
FILTER = "(&(objectClass=inetOrgPerson)(uid={username})(!(employeeType=disabled)))"


def _sections(slapd, idp, issuer: str | None = None) -> dict:  # noqa: ANN001
    return {
        "ldap": {
            "enabled": True,
            "url": slapd.ldaps_url,
            "start_tls": False,
            "ca_file": str(slapd.ca_file),
            "bind_dn": slapd.bind_dn,
            "bind_password": slapd.bind_password,
            "user_base": slapd.people_dn,
            "user_filter": FILTER,
            "timeout_s": 2,
        },
        "oidc": {
            "enabled": True,
            "display_name": "Example SSO",
            "issuer": issuer or idp.issuer,
            "client_id": idp.client_id,
            "client_secret": idp.client_secret,
            "timeout_s": 3,
        },
        "directory": {
            "admin_groups": ["admins"],
            "staff_groups": ["staff-all"],
            "group_collections": {"hr-team": ["hr"]},
        },
    }


def _actions(site) -> list[str]:  # noqa: ANN001
    with site.appliance.db.session() as s:
        return list(s.scalars(select(AuditEvent.action).order_by(AuditEvent.id)))


def _start(site, http: httpx.Client) -> str:  # noqa: ANN001
    """Begin an OIDC sign-in; the provider URL the appliance sends the browser to."""
    r = http.get(f"{site.base}/oidc/login?next=/admin/", follow_redirects=False)
    assert r.status_code == 303, r.text
    return r.headers["location"]


def _oidc(site, idp, user: str, password: str) -> tuple[httpx.Response, httpx.Client]:  # noqa: ANN001
    http = httpx.Client(timeout=20)
    callback = idp.login(http, _start(site, http), user, password)
    return http.get(callback, follow_redirects=False), http


@contextmanager
def _site(own_site, ldap_directory, oidc_idp, issuer: str | None = None) -> Iterator:  # noqa: ANN001
    ldap_directory.add_user("erin", "erin-pass-1", groups=("staff-all", "hr-team"))
    oidc_idp.add_user("erin", "erin-pass-1", groups=["staff-all", "hr-team"])
    with own_site(**_sections(ldap_directory, oidc_idp, issuer)) as site:
        yield site


def test_oidc_sign_in_maps_groups_and_refuses_what_it_must(
    own_site, ldap_directory, oidc_idp
) -> None:  # noqa: ANN001
    with _site(own_site, ldap_directory, oidc_idp) as site:
        page = httpx.get(f"{site.base}/login")
        assert "Sign in with Example SSO" in page.text and "/oidc/login" in page.text

        done, _ = _oidc(site, oidc_idp, "carol", "carol-pass-1")
        assert done.status_code == 303 and done.headers["location"] == "/admin/"
        carol = site.auth.resolve(done.cookies[SESSION])
        assert (carol.username, carol.role) == ("carol", "admin")
        done, _ = _oidc(site, oidc_idp, "erin", "erin-pass-1")
        erin = site.auth.resolve(done.cookies[SESSION])
        assert (erin.role, erin.collections) == ("staff", frozenset({"hr"}))

        # an OIDC account's API key works oidc.key_hours after its last sign-in, then stops
        key, _ = site.auth.api_keys.create(erin, "script")
        assert site.auth.api_keys.authenticate(key).principal.username == "erin"
        with site.appliance.db.session() as s:
            s.execute(
                update(User)
                .where(User.id == erin.user_id)
                .values(confirmed_at=datetime.now(UTC) - timedelta(hours=25))
            )
        assert site.auth.api_keys.authenticate(key).principal is None

        # a group change at the provider applies at the next sign-in
        oidc_idp.remove_from_group("erin", "hr-team")
        done, _ = _oidc(site, oidc_idp, "erin", "erin-pass-1")
        assert site.auth.resolve(done.cookies[SESSION]).collections == {"default"}

        # no admitted group; a local account's name (root, alice): refused pages, no session
        for user, password in (("dave", "dave-pass-1"), ("root", "root-dir-pass")):
            refused, _ = _oidc(site, oidc_idp, user, password)
            assert refused.status_code == 403 and SESSION not in refused.cookies
            assert "Ask an administrator" in refused.text
        assert {"login.directory.refused", "login.directory.shadowed"} <= set(_actions(site))


BAD_TOKENS = [
    ({"preferred_username": "carol", "groups": ["admins"]}, "keep"),  # a tampered payload
    ({}, "foreign"),  # signed by another key under the provider's key id
    ({}, "none"),
    ({}, "hs256"),
    ({"iss": "https://evil.example"}, "provider"),  # an unknown issuer
    ({"aud": "another-client"}, "provider"),
    ({"nonce": "not-this-flows"}, "provider"),
    ({"exp": 1_000_000_000}, "provider"),
]


def test_a_bad_id_token_gets_no_session(own_site, ldap_directory, oidc_idp) -> None:  # noqa: ANN001
    with _site(own_site, ldap_directory, oidc_idp) as site:
        for n, (claims, signer) in enumerate(BAD_TOKENS, 1):
            oidc_idp.tamper_next_id_token(claims, signer=signer)
            refused, _ = _oidc(site, oidc_idp, "erin", "erin-pass-1")
            assert refused.status_code == 400 and SESSION not in refused.cookies, (claims, signer)
            assert "could not be completed" in refused.text
            assert _actions(site).count("login.oidc.failed") == n
        assert "login.ok" not in _actions(site)


def test_state_replay_issuer_and_outages(own_site, ldap_directory, oidc_idp) -> None:  # noqa: ANN001
    with _site(own_site, ldap_directory, oidc_idp) as site:
        http = httpx.Client(timeout=20)
        callback = oidc_idp.login(http, _start(site, http), "erin", "erin-pass-1")
        parts = urlsplit(callback)
        query = dict(parse_qsl(parts.query))
        wrong = f"{site.base}/oidc/callback?{urlencode({**query, 'state': 'x' * 32})}"
        assert http.get(wrong).status_code == 400
        # another browser (no state cookie) presenting a real callback: login CSRF
        assert httpx.get(callback).status_code == 400
        ok = http.get(callback, follow_redirects=False)
        assert ok.status_code == 303 and SESSION in ok.cookies
        replay = http.get(callback, follow_redirects=False)  # the state is used once
        assert replay.status_code == 400 and SESSION not in replay.cookies
        huge = http.get(f"{site.base}/oidc/callback", params={"state": "s" * 5000, "code": "c"})
        assert huge.status_code == 400
        assert _actions(site).count("login.oidc.failed") >= 4

        # the provider goes down between its sign-in page and the code exchange
        callback = oidc_idp.login(http, _start(site, http), "erin", "erin-pass-1")
        oidc_idp.stop()
        try:
            down = http.get(callback, follow_redirects=False)
            assert down.status_code == 503 and "cannot be reached" in down.text
            assert SESSION not in down.cookies
        finally:
            oidc_idp.start()
        assert "login.oidc.down" in _actions(site)

        # LDAP through the form and /api/login
        form = {"username": "carol", "password": "carol-pass-1", "next": "/"}
        signed = httpx.post(f"{site.base}/login", data=form, follow_redirects=False)
        assert signed.status_code == 303 and SESSION in signed.cookies
        for name in ("*)(uid=*", "carol)(|(uid=*", "*"):
            bad = httpx.post(f"{site.base}/api/login", json={"username": name, "password": "x"})
            assert bad.status_code == 401
        ldap_directory.stop()
        try:
            down = httpx.post(f"{site.base}/api/login", json={"username": "erin", "password": "p"})
            assert down.status_code == 503 and "directory" in down.json()["detail"]
            page = httpx.post(f"{site.base}/login", data={**form, "username": "erin"})
            assert page.status_code == 503 and "cannot be reached" in page.text
        finally:
            ldap_directory.start()
        assert "login.directory.down" in _actions(site)


def test_an_issuer_that_is_not_the_configured_one_is_refused(
    own_site, ldap_directory, oidc_idp
) -> None:  # noqa: ANN001
    # the same provider reached by another name: its discovery document names 127.0.0.1
    other = oidc_idp.issuer.replace("127.0.0.1", "localhost")
    with _site(own_site, ldap_directory, oidc_idp, issuer=other) as site:
        refused = httpx.get(f"{site.base}/oidc/login", follow_redirects=False)
        assert refused.status_code == 502 and SESSION not in refused.cookies
        with site.appliance.db.session() as s:
            detail = s.scalar(
                select(AuditEvent.detail).where(AuditEvent.action == "login.oidc.failed")
            )
        assert "names its issuer" in detail["reason"]


@pytest.mark.browser
def test_sign_in_through_ldap_and_oidc_in_the_browser(
    own_site, ldap_directory, oidc_idp, browser
) -> None:  # noqa: ANN001
    with _site(own_site, ldap_directory, oidc_idp) as site:
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{site.base}/login")
        page.fill("#username", "erin")
        page.fill("#password", "erin-pass-1")
        page.click("#login")
        page.wait_for_url(f"{site.base}/")
        assert site.auth.resolve(_cookie(context)).username == "erin"
        context.close()

        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{site.base}/login?next=/admin/")
        page.click("#oidc-login")
        page.wait_for_url(f"{oidc_idp.issuer}/**")
        page.fill("#login", "carol")
        page.fill("#password", "carol-pass-1")
        page.click("#submit")
        page.wait_for_url(f"{site.base}/admin/")
        page.wait_for_selector("#admin-tabs", state="visible", timeout=30_000)
        assert site.auth.resolve(_cookie(context)).role == "admin"
        context.close()


def _cookie(context) -> str:  # noqa: ANN001
    return next(c["value"] for c in context.cookies() if c["name"] == SESSION)


@pytest.mark.browser
def test_the_sign_in_tab_hides_secrets_and_tests_connections(
    own_site, ldap_directory, oidc_idp, browser
) -> None:  # noqa: ANN001
    with _site(own_site, ldap_directory, oidc_idp) as site:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.goto(f"{site.base}/admin/")
        page.fill("#username", "root")
        page.fill("#password", PASSWORD)
        page.click("#login")
        page.wait_for_selector("#admin-tabs", state="visible", timeout=30_000)
        page.get_by_role("tab", name="Sign-in").click()
        secret = page.locator("#dir-ldap-bind_password input, #dir-ldap-bind_password textarea")
        secret.first.wait_for(timeout=30_000)
        assert ldap_directory.bind_password not in page.content()
        assert oidc_idp.client_secret not in page.content()
        page.click("#dir-ldap-test")
        page.locator("#dir-ldap-note", has_text="OK: bound as").wait_for(timeout=30_000)
        page.click("#dir-oidc-test")
        page.locator("#dir-oidc-note", has_text="signing key").wait_for(timeout=30_000)
        # saving the form as shown changes what was edited and keeps the stored secret
        page.locator("#dir-ldap-user_filter input, #dir-ldap-user_filter textarea").first.fill(
            FILTER.replace("inetOrgPerson", "person")
        )
        page.click("#dir-ldap-save")
        page.locator("#dir-ldap-note", has_text="Saved").wait_for(timeout=30_000)
        current = site.appliance.directory.current().ldap
        assert current.user_filter == FILTER.replace("inetOrgPerson", "person")
        assert current.bind_password == ldap_directory.bind_password
        context.close()
