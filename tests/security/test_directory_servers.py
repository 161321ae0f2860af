"""The real identity servers the sign-in tests use: OpenLDAP slapd and an OpenID Provider.

These check the test servers themselves (tests/support/slapd.py, oidc_provider.py), not the
appliance: the service account finds people with their groups over StartTLS and LDAPS that
verify against the test CA, stop/restart works, and an authorization code + PKCE flow ends in an
ID token with the groups claim.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import socket
import ssl

import httpx
import pytest
from support.oidc_provider import OidcLoginError
from support.slapd import LdapToolError

CALLBACK = "http://127.0.0.1:9/oidc/callback"  # nothing listens: the code is read, not followed


def _group(server, cn: str) -> str:  # noqa: ANN001
    return server.group_dn(cn)


# ---- slapd ------------------------------------------------------------------------------


def test_service_account_finds_alice_with_groups(ldap_directory) -> None:  # noqa: ANN001
    d = ldap_directory
    [alice] = d.search(d.user_filter.format(username="alice"), ["uid", "mail", "memberOf"])
    assert alice["dn"] == ["uid=alice,ou=people,dc=example,dc=com"]
    assert alice["mail"] == ["alice@example.com"]
    assert sorted(alice["memberOf"]) == sorted([_group(d, "hr-team"), _group(d, "staff-all")])
    [hr] = d.search("(cn=hr-team)", ["memberOf"], base=d.groups_dn)
    assert hr["memberOf"] == [_group(d, "engineering")]  # the nested group
    assert d.groups_of("dave") == []
    assert d.bind_ok(d.user_dn("alice"), "alice-pass-1")
    assert not d.bind_ok(d.user_dn("alice"), "wrong")
    assert d.bind_ok(d.user_dn("root"), "root-dir-pass")


@pytest.mark.parametrize("tls", ["starttls", "ldaps"])
def test_tls_verifies_against_the_test_ca(ldap_directory, tls: str) -> None:  # noqa: ANN001
    d = ldap_directory
    [alice] = d.search("(uid=alice)", ["uid"], tls=tls)
    assert alice["uid"] == ["alice"]
    trusting = ssl.create_default_context(cafile=str(d.ca_file))
    with (
        socket.create_connection((d.host, d.ldaps_port), timeout=5) as raw,
        trusting.wrap_socket(raw, server_hostname="127.0.0.1") as tls_socket,
    ):
        assert tls_socket.version()
    with (
        pytest.raises(ssl.SSLCertVerificationError),
        socket.create_connection((d.host, d.ldaps_port), timeout=5) as raw,
    ):
        ssl.create_default_context().wrap_socket(raw, server_hostname="127.0.0.1")


def test_ldap3_client_over_starttls_and_ldaps(ldap_directory) -> None:  # noqa: ANN001
    ldap3 = pytest.importorskip("ldap3")
    d = ldap_directory
    tls = ldap3.Tls(validate=ssl.CERT_REQUIRED, ca_certs_file=str(d.ca_file))
    for url, start_tls in ((d.ldap_url, True), (d.ldaps_url, False)):
        server = ldap3.Server(url, tls=tls, connect_timeout=5)
        conn = ldap3.Connection(server, d.bind_dn, d.bind_password, receive_timeout=5)
        if start_tls:
            conn.open()
            assert conn.start_tls()
        assert conn.bind(), conn.result
        conn.search(d.base_dn, "(uid=bob)", attributes=["cn", "memberOf"])
        [bob] = conn.entries
        assert bob.memberOf.values == [_group(d, "staff-all")]
        conn.unbind()


def test_changes_disable_and_reset(ldap_directory) -> None:  # noqa: ANN001
    d = ldap_directory
    d.add_user("erin", "erin-pass-1", "Erin Evans", groups=["admins", "brand-new"])
    assert d.groups_of("erin") == ["admins", "brand-new"]
    d.remove_from_group("carol", "admins")
    d.remove_from_group("erin", "admins")  # the last member: the placeholder keeps the group
    assert d.groups_of("carol") == []
    d.add_to_group("dave", "admins")
    assert d.search("(cn=admins)", ["member"], base=d.groups_dn)[0]["member"] == [d.user_dn("dave")]
    d.disable_user("bob")
    assert d.search(d.user_filter.format(username="bob")) == []
    assert d.bind_ok(d.user_dn("bob"), "bob-pass-1")  # only the filter keeps bob out
    d.set_password("alice", "alice-pass-2")
    assert d.bind_ok(d.user_dn("alice"), "alice-pass-2")

    d.reset()
    assert d.user("erin") is None
    assert d.groups_of("carol") == ["admins"]
    assert d.groups_of("dave") == []
    assert len(d.search(d.user_filter.format(username="bob"))) == 1
    assert d.bind_ok(d.user_dn("alice"), "alice-pass-1")


def test_stop_and_restart(ldap_directory) -> None:  # noqa: ANN001
    d = ldap_directory
    d.stop()
    assert not d.running
    with pytest.raises(OSError):
        socket.create_connection((d.host, d.port), timeout=2).close()
    with pytest.raises(LdapToolError):
        d.search("(uid=alice)")
    d.start()
    assert d.search("(uid=alice)", ["uid"])[0]["uid"] == ["alice"]  # the data survived


# ---- the OpenID Provider ----------------------------------------------------------------


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _claims(jwt: str) -> dict:
    part = jwt.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def _code_flow(idp, username: str, password: str, browser=None) -> tuple[httpx.Response, str]:  # noqa: ANN001
    """Sign in as ``username`` (in a fresh client unless given one); the token response and
    the nonce."""
    verifier, challenge = _pkce()
    state, nonce = secrets.token_urlsafe(8), secrets.token_urlsafe(8)
    url = idp.authorize_url(CALLBACK, state=state, nonce=nonce, code_challenge=challenge)
    with httpx.Client(timeout=10) as fresh:
        back = httpx.URL(idp.login(browser or fresh, url, username, password))
    assert str(back).startswith(CALLBACK)
    assert back.params["state"] == state
    token = httpx.post(
        idp.token_endpoint,
        data={
            "grant_type": "authorization_code",
            "code": back.params["code"],
            "redirect_uri": CALLBACK,
            "code_verifier": verifier,
        },
        auth=(idp.client_id, idp.client_secret),
        timeout=10,
    )
    return token, nonce


def test_discovery_and_jwks(oidc_idp) -> None:  # noqa: ANN001
    meta = httpx.get(oidc_idp.discovery_url, timeout=10).json()
    assert meta["issuer"] == oidc_idp.issuer
    assert meta["issuer"].startswith("http://127.0.0.1:")
    assert meta["jwks_uri"] == oidc_idp.jwks_uri
    assert meta["authorization_endpoint"] == oidc_idp.authorization_endpoint
    assert meta["token_endpoint"] == oidc_idp.token_endpoint
    assert {"openid", "profile", "email", "groups"} <= set(meta["scopes_supported"])
    assert meta["code_challenge_methods_supported"] == ["S256"]
    [key] = httpx.get(oidc_idp.jwks_uri, timeout=10).json()["keys"]
    assert key["kty"] == "RSA" and key["alg"] == "RS256" and "d" not in key
    assert oidc_idp.keys()["provider"]["kid"] == key["kid"]


def test_code_flow_with_pkce_gives_groups(oidc_idp) -> None:  # noqa: ANN001
    token, nonce = _code_flow(oidc_idp, "alice", "alice-pass-1")
    assert token.status_code == 200, token.text
    id_token = token.json()["id_token"]
    claims = _claims(id_token)
    assert claims["iss"] == oidc_idp.issuer and claims["aud"] == "appliance"
    assert claims["nonce"] == nonce
    assert claims["sub"] == "sub-alice-0001" and claims["preferred_username"] == "alice"
    assert claims["groups"] == ["staff-all", "hr-team"]
    assert claims["email"] == "alice@example.com"
    assert _verify_rs256(id_token, httpx.get(oidc_idp.jwks_uri, timeout=10).json()["keys"][0])
    info = httpx.get(
        oidc_idp.userinfo_endpoint,
        headers={"Authorization": f"Bearer {token.json()['access_token']}"},
        timeout=10,
    ).json()
    assert info["groups"] == ["staff-all", "hr-team"]


def _verify_rs256(jwt: str, jwk: dict) -> bool:
    """Whether ``jwt`` carries a valid RS256 signature by ``jwk`` (skips without cryptography)."""
    pytest.importorskip("cryptography")
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    def number(b64: str) -> int:
        return int.from_bytes(base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)), "big")

    key = rsa.RSAPublicNumbers(number(jwk["e"]), number(jwk["n"])).public_key()
    head, body, sig = jwt.split(".")
    signature = base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4))
    try:
        key.verify(signature, f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        return False
    return True


def test_passwords_disabled_accounts_and_group_changes(oidc_idp) -> None:  # noqa: ANN001
    with pytest.raises(OidcLoginError, match="Invalid username or password"):
        _code_flow(oidc_idp, "alice", "wrong")
    oidc_idp.disable_user("bob")
    with pytest.raises(OidcLoginError, match="disabled"):
        _code_flow(oidc_idp, "bob", "bob-pass-1")
    with httpx.Client(timeout=10) as browser:  # signed in, then disabled: asked to sign in again
        _code_flow(oidc_idp, "carol", "carol-pass-1", browser)
        oidc_idp.disable_user("carol")
        with pytest.raises(OidcLoginError, match="disabled"):
            _code_flow(oidc_idp, "carol", "carol-pass-1", browser)
    oidc_idp.set_groups("dave", ["admins"])
    token, _ = _code_flow(oidc_idp, "dave", "dave-pass-1")
    assert _claims(token.json()["id_token"])["groups"] == ["admins"]
    oidc_idp.reset()
    token, _ = _code_flow(oidc_idp, "bob", "bob-pass-1")
    assert _claims(token.json()["id_token"])["groups"] == ["staff-all"]


def test_pkce_and_redirect_uri_are_enforced(oidc_idp) -> None:  # noqa: ANN001
    params = {"client_id": "appliance", "response_type": "code", "scope": "openid"}
    no_pkce = httpx.get(
        oidc_idp.authorization_endpoint, params={**params, "redirect_uri": CALLBACK}, timeout=10
    )
    assert no_pkce.status_code == 303
    assert "error=invalid_request" in no_pkce.headers["location"]
    _, challenge = _pkce()
    pkce = {"code_challenge": challenge, "code_challenge_method": "S256"}
    elsewhere = {**params, **pkce, "redirect_uri": "http://127.0.0.1:9/elsewhere"}
    refused = httpx.get(oidc_idp.authorization_endpoint, params=elsewhere, timeout=10)
    assert refused.status_code == 400 and "redirect_uri" in refused.text
    oidc_idp.allow_redirect_uri("http://127.0.0.1:9/elsewhere")
    allowed = httpx.get(oidc_idp.authorization_endpoint, params=elsewhere, timeout=10)
    assert allowed.status_code == 303 and "/interaction/" in allowed.headers["location"]


def test_forged_and_tampered_id_tokens(oidc_idp) -> None:  # noqa: ANN001
    keys = oidc_idp.keys()
    assert keys["provider"]["kid"] != keys["foreign"]["kid"] and "d" in keys["foreign"]
    forged = oidc_idp.sign({"sub": "sub-carol-0001", "groups": ["admins"]}, signer="foreign")
    forged_header = json.loads(base64.urlsafe_b64decode(forged.split(".")[0] + "=="))
    assert forged_header["kid"] == keys["provider"]["kid"]
    assert not _verify_rs256(forged, httpx.get(oidc_idp.jwks_uri, timeout=10).json()["keys"][0])
    oidc_idp.tamper_next_id_token({"groups": ["admins"]}, signer="keep")
    token, _ = _code_flow(oidc_idp, "bob", "bob-pass-1")
    tampered = token.json()["id_token"]
    assert _claims(tampered)["groups"] == ["admins"]
    jwk = httpx.get(oidc_idp.jwks_uri, timeout=10).json()["keys"][0]
    assert not _verify_rs256(tampered, jwk)
    token, _ = _code_flow(oidc_idp, "bob", "bob-pass-1")  # only the next one was changed
    assert _verify_rs256(token.json()["id_token"], jwk)


def test_provider_stop_and_restart(oidc_idp) -> None:  # noqa: ANN001
    issuer, kid = oidc_idp.issuer, oidc_idp.keys()["provider"]["kid"]
    oidc_idp.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(oidc_idp.discovery_url, timeout=5)
    oidc_idp.start()
    assert oidc_idp.issuer == issuer
    assert httpx.get(oidc_idp.jwks_uri, timeout=10).json()["keys"][0]["kid"] == kid


@pytest.mark.browser
def test_a_browser_signs_in_at_the_provider(oidc_idp, browser) -> None:  # noqa: ANN001
    _, challenge = _pkce()
    url = oidc_idp.authorize_url(CALLBACK, state="s-1", nonce="n-1", code_challenge=challenge)
    context = browser.new_context()  # the suite's one Chromium (tests/security/conftest.py)
    try:
        page = context.new_page()
        page.route(f"{CALLBACK}**", lambda route: route.fulfill(body="back at the appliance"))
        page.goto(url)
        page.fill("#login", "alice")
        page.fill("#password", "wrong")
        page.click("#submit")
        assert "Invalid username or password" in page.inner_text("#error")
        page.fill("#password", "alice-pass-1")
        page.click("#submit")
        page.wait_for_url(f"{CALLBACK}**")
        back = httpx.URL(page.url)
    finally:
        context.close()
    assert back.params["state"] == "s-1" and back.params["code"]
