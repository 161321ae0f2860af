"""The directory settings from the console: validated per section, secrets write-only, audited
without their values (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from appliance.core.auth.directory_accounts import DirectorySettings
from appliance.core.db.models import AuditEvent
from appliance.core.directory_config import DirectoryConfig, LdapConfig, OidcConfig
from appliance.core.services.admin.directory import AdminDirectory
from appliance.core.services.directory_settings import (
    DirectorySettingsError,
    DirectorySettingsStore,
)

BASE = DirectorySettings(LdapConfig(), OidcConfig(), DirectoryConfig())


def test_a_saved_section_applies_and_its_secret_is_never_shown(db) -> None:  # noqa: ANN001
    console = AdminDirectory(DirectorySettingsStore(db, BASE))
    form = {"enabled": True, "url": "ldaps://dc.corp:636", "user_base": "dc=corp",
            "bind_dn": "cn=svc,dc=corp", "bind_password": "s3cret-pass"}  # fmt: skip
    settings = console.save("ldap", form, "root")
    assert settings.ldap.bind_password == "s3cret-pass" and settings.ldap.enabled
    shown = console.form("ldap")
    assert shown["bind_password"] == "(set)" and shown["url"] == "ldaps://dc.corp:636"
    # saving the form as shown (secret placeholder, or empty) keeps the stored secret
    console.save("ldap", {**shown, "timeout_s": 3}, "root")
    console.save("ldap", {"bind_password": ""}, "root")
    fresh = DirectorySettingsStore(db, BASE).current()  # another worker reads the same
    assert (fresh.ldap.bind_password, fresh.ldap.timeout_s) == ("s3cret-pass", 3.0)
    with db.session() as s:
        events = list(s.scalars(select(AuditEvent).where(AuditEvent.action.like("settings.dir%"))))
    assert len(events) == 3 and all("s3cret" not in str(e.detail) for e in events)
    assert events[0].detail["keys"] == ["bind_dn", "bind_password", "enabled", "url", "user_base"]


def test_the_group_mapping_reads_form_text(db) -> None:  # noqa: ANN001
    console = AdminDirectory(DirectorySettingsStore(db, BASE))
    mapping = console.save(
        "directory",
        {"admin_groups": "admins, it-ops", "group_collections": "hr-team: hr, default\nit: it"},
        "root",
    ).mapping
    assert mapping.admin_groups == ("admins", "it-ops")
    assert mapping.group_collections == {"hr-team": ("hr", "default"), "it": ("it",)}
    assert console.form("directory")["group_collections"] == "hr-team: hr, default\nit: it"


@pytest.mark.parametrize(
    ("section", "values", "says"),
    [
        ("ldap", {"enabled": True}, "ldap.url"),
        ("ldap", {"url": "http://dc"}, "ldap.url"),
        ("ldap", {"user_filter": "(uid=*)"}, "user_filter"),
        ("oidc", {"enabled": True, "issuer": "idp"}, "issuer"),
        ("oidc", {"colour": "red"}, "colour"),
        ("directory", {"group_collections": "no colon here"}, "group_collections"),
        ("nosuch", {}, "nosuch"),
    ],
)
def test_a_wrong_value_stores_nothing_and_names_the_key(db, section, values, says) -> None:  # noqa: ANN001
    store = DirectorySettingsStore(db, BASE)
    with pytest.raises(DirectorySettingsError, match=says):
        AdminDirectory(store).save(section, values, "root")
    assert store.current() == BASE
