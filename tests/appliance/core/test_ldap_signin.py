"""Sign-in through a real OpenLDAP (slapd, seeded: tests/support/directory_seed.py) on SQLite
and PostgreSQL: StartTLS and LDAPS against the test CA, groups mapped at every sign-in, a
disabled account's keys and sessions stopped at the next check, injection, shadowing and a
directory that is down."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import select

from appliance.core.auth.directory_accounts import NO_PASSWORD, DirectorySettings
from appliance.core.auth.directory_signin import DIRECTORY_DOWN, DirectorySignIn
from appliance.core.auth.service import AuthError, AuthService
from appliance.core.db.models import AuditEvent, User
from appliance.core.directory_config import DirectoryConfig, LdapConfig, OidcConfig

FILTER = "(&(objectClass=inetOrgPerson)(uid={username})(!(employeeType=disabled)))"
MAPPING = DirectoryConfig(
    admin_groups=("admins",),
    staff_groups=("staff-all",),
    group_collections={"hr-team": ("hr", "default")},
    check_interval_s=0,  # every key or session use asks the directory again
)


def _ldap(server, tls: str = "starttls") -> LdapConfig:  # noqa: ANN001
    return LdapConfig(
        enabled=True,
        url=server.ldaps_url if tls == "ldaps" else server.ldap_url,
        start_tls=tls == "starttls",
        ca_file=str(server.ca_file),
        bind_dn=server.bind_dn,
        bind_password=server.bind_password,
        user_base=server.people_dn,
        user_filter=FILTER,
        timeout_s=2,
    )


def _auth(db, server, tls: str = "starttls") -> AuthService:  # noqa: ANN001
    settings = DirectorySettings(_ldap(server, tls), OidcConfig(), MAPPING)
    return AuthService(db, 1.0, directory=DirectorySignIn(db, lambda: settings))


def _actions(db) -> list[str]:  # noqa: ANN001
    with db.session() as s:
        return list(s.scalars(select(AuditEvent.action).order_by(AuditEvent.id)))


@pytest.mark.parametrize("tls", ["starttls", "ldaps"])
def test_a_directory_user_signs_in_with_their_groups(db, ldap_directory, tls) -> None:  # noqa: ANN001
    auth = _auth(db, ldap_directory, tls)
    result = auth.login("alice", "alice-pass-1", "10.0.0.1")
    assert result.token and result.principal is not None
    assert (result.principal.role, result.principal.collections) == (
        "staff",
        frozenset({"hr", "default"}),
    )
    with db.session() as s:
        user = s.scalar(select(User).where(User.username == "alice"))
        assert (user.source, user.password_hash) == ("ldap", NO_PASSWORD)
        assert user.external_id == ldap_directory.user_dn("alice")
    assert auth.resolve(result.token).username == "alice"
    assert auth.login("carol", "carol-pass-1").principal.role == "admin"
    assert _actions(db).count("login.ok") == 2


def test_wrong_empty_and_injected_credentials_get_no_session(db, ldap_directory) -> None:  # noqa: ANN001
    auth = _auth(db, ldap_directory)
    for name, password in [
        ("alice", "wrong"),
        ("alice", ""),
        ("*)(uid=*", "alice-pass-1"),
        ("*", "alice-pass-1"),
        ("alice)(|(uid=*", "x"),
        ("nobody", "alice-pass-1"),
    ]:
        result = auth.login(name, password, "10.0.0.2")
        assert result.token is None and result.principal is None and not result.refused, name
    with db.session() as s:
        assert s.scalar(select(User.id)) is None  # nobody got a local record
    assert _actions(db).count("login.failed") == 6


def test_the_local_admin_cannot_be_shadowed(db, ldap_directory) -> None:  # noqa: ANN001
    auth = _auth(db, ldap_directory)
    auth.create_user("root", "local-root-pass", role="admin")
    assert auth.login("root", "root-dir-pass").principal is None  # the directory's root
    assert auth.login("root", "local-root-pass").principal.role == "admin"
    # a directory account that finds its name taken by a local one is refused, audited
    auth.create_user("carol", "local-carol-pass")
    outcome = auth.directory.password("carol", "carol-pass-1", "")
    assert outcome.principal is None and "already exists" in outcome.refused
    assert "login.directory.shadowed" in _actions(db)


def test_group_changes_apply_at_the_next_sign_in(db, ldap_directory) -> None:  # noqa: ANN001
    auth = _auth(db, ldap_directory)
    assert auth.login("alice", "alice-pass-1").principal.collections == {"hr", "default"}
    ldap_directory.remove_from_group("alice", "hr-team")
    ldap_directory.add_to_group("alice", "admins")
    again = auth.login("alice", "alice-pass-1").principal
    assert (again.role, again.collections) == ("admin", frozenset({"default"}))
    ldap_directory.remove_from_group("alice", "admins")
    ldap_directory.remove_from_group("alice", "staff-all")
    refused = auth.login("alice", "alice-pass-1")
    assert refused.principal is None and "none of the groups" in refused.refused
    assert "login.directory.refused" in _actions(db)


def test_a_disabled_account_loses_its_keys_and_sessions(db, ldap_directory) -> None:  # noqa: ANN001
    auth = _auth(db, ldap_directory)
    login = auth.login("bob", "bob-pass-1")
    key, _ = auth.api_keys.create(login.principal, "script")
    assert auth.api_keys.authenticate(key).principal.username == "bob"
    ldap_directory.disable_user("bob")
    assert auth.api_keys.authenticate(key).principal is None
    assert auth.resolve(login.token) is None
    assert auth.login("bob", "bob-pass-1").principal is None
    assert "directory.account.refused" in _actions(db)
    ldap_directory.enable_user("bob")  # enabled again in the directory: works again
    assert auth.api_keys.authenticate(key).principal.username == "bob"


def test_a_directory_that_is_down_is_a_clear_refusal(db, ldap_directory) -> None:  # noqa: ANN001
    auth = _auth(db, ldap_directory)
    login = auth.login("bob", "bob-pass-1")
    ldap_directory.stop()
    try:
        result = auth.login("alice", "alice-pass-1", "10.0.0.3")
        assert result.principal is None and result.refused == DIRECTORY_DOWN
        assert auth.resolve(login.token) is None  # fail closed: the account cannot be confirmed
        actions = _actions(db)
        assert "login.directory.down" in actions and "directory.down" in actions
        auth.create_user("root", "local-root-pass", role="admin")  # break-glass still works
        assert auth.login("root", "local-root-pass").principal is not None
    finally:
        ldap_directory.start()


def test_directory_users_change_their_password_in_the_directory(db, ldap_directory) -> None:  # noqa: ANN001
    auth = _auth(db, ldap_directory)
    token = auth.login("alice", "alice-pass-1").token
    with pytest.raises(AuthError, match="directory"):
        auth.change_password(token, "alice-pass-1", "new-password-1")
    with pytest.raises(AuthError, match="directory"):
        auth.set_password("alice", "new-password-1")


def test_without_a_directory_a_directory_record_cannot_sign_in(db, ldap_directory) -> None:  # noqa: ANN001
    _auth(db, ldap_directory).login("alice", "alice-pass-1")
    local_only: Callable[[], AuthService] = lambda: AuthService(db, 1.0)  # noqa: E731
    assert local_only().login("alice", "alice-pass-1").principal is None
    assert local_only().login("alice", NO_PASSWORD).principal is None


def test_the_console_shows_the_source_and_leaves_groups_to_the_directory(
    db, ldap_directory
) -> None:  # noqa: ANN001
    from appliance.core.services.admin.users import AdminError, AdminUsers

    auth = _auth(db, ldap_directory)
    auth.login("alice", "alice-pass-1")
    users = AdminUsers(auth)
    assert [u["source"] for u in users.list_users()] == ["ldap"]
    with pytest.raises(AdminError, match="directory groups"):
        users.set_role("root", "alice", "admin")
    with pytest.raises(AdminError, match="directory groups"):
        users.set_collections("root", "alice", ["secret"])


def test_test_connection_and_doctor_say_what_failed(db, ldap_directory, tmp_path) -> None:  # noqa: ANN001
    from appliance.core.services.admin.directory import AdminDirectory
    from appliance.core.services.directory_settings import DirectorySettingsStore

    settings = DirectorySettings(_ldap(ldap_directory), OidcConfig(), MAPPING)
    console = AdminDirectory(DirectorySettingsStore(db, settings))
    ok, detail = console.test("ldap", "root")
    assert ok and "bound as cn=svc" in detail
    console.save("ldap", {"bind_password": "wrong-secret"}, "root")
    ok, detail = console.test("ldap", "root")
    assert not ok and "service account" in detail
    ldap_directory.stop()
    try:
        ok, detail = console.test("ldap", "root")
        assert not ok and "cannot reach" in detail
    finally:
        ldap_directory.start()
    assert _actions(db).count("settings.directory.test") == 3


def test_groups_can_come_from_a_group_search(db, ldap_directory) -> None:  # noqa: ANN001
    ldap = _ldap(ldap_directory).model_copy(
        update={"group_base": ldap_directory.groups_dn, "group_filter": "(member={dn})"}
    )
    settings = DirectorySettings(ldap, OidcConfig(), MAPPING)
    auth = AuthService(db, 1.0, directory=DirectorySignIn(db, lambda: settings))
    principal = auth.login("alice", "alice-pass-1").principal
    assert principal.collections == {"hr", "default"}
    assert auth.login("carol", "carol-pass-1").principal.role == "admin"
