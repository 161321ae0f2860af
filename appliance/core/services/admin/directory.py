"""The admin console's sign-in settings: the LDAP and OIDC providers and the group mapping
(``DirectorySettingsStore``: secrets write-only, every change audited), read from and written
as form text, and a "test connection" for each provider (also ``appliance doctor``'s check).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from appliance.core.auth.directory_accounts import DirectorySettings
from appliance.core.auth.ldap_directory import DirectoryDown, LdapDirectory
from appliance.core.auth.oidc_client import OidcClient, OidcError
from appliance.core.db.models import AuditEvent
from appliance.core.directory_config import LdapConfig, OidcConfig
from appliance.core.services.directory_settings import (
    SECRETS,
    SECTIONS,
    DirectorySettingsError,
    DirectorySettingsStore,
)


def test_ldap(config: LdapConfig) -> tuple[bool, str]:
    """Bind as the service account and read the user base: (ok, what happened)."""
    if not config.url:
        return False, "no ldap.url set"
    try:
        return True, LdapDirectory(config).test_connection()
    except DirectoryDown as exc:
        return False, str(exc)


def test_oidc(config: OidcConfig) -> tuple[bool, str]:
    """Fetch the discovery document (its issuer checked) and the provider's keys."""
    if not config.issuer:
        return False, "no oidc.issuer set"
    client = OidcClient(config)
    try:
        doc = client.discovery()
        keys = client._key_set()  # noqa: SLF001 - the check is that they load
    except OidcError as exc:
        return False, str(exc)
    return True, f"issuer {doc['issuer']} answers, {len(keys.keys)} signing key(s)"


def _as_form(value: Any) -> Any:
    """A setting as a form field shows it: lists comma-separated, the group map one line
    per group (``group: collection, collection``)."""
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict):
        return "\n".join(f"{k}: {', '.join(v)}" for k, v in value.items())
    return value


def _from_form(kind: Any, text: Any) -> Any:
    if not isinstance(text, str):
        return text
    if kind is dict:
        mapping: dict[str, list[str]] = {}
        for line in text.splitlines():
            group, sep, names = line.partition(":")
            if not line.strip():
                continue
            if not sep or not group.strip():
                raise DirectorySettingsError(f"group_collections: {line!r} is not 'group: names'")
            mapping[group.strip()] = [n.strip() for n in names.split(",") if n.strip()]
        return mapping
    if kind is tuple:
        return [v.strip() for v in text.split(",") if v.strip()]
    return text


def _kind(section: str, key: str) -> Any:
    annotation = SECTIONS[section].model_fields[key].annotation
    origin = getattr(annotation, "__origin__", annotation)
    return dict if origin is dict else tuple if origin is tuple else None


class AdminDirectory:
    """Sign-in settings for the console; ``store`` holds them."""

    def __init__(self, store: DirectorySettingsStore) -> None:
        self.store = store

    def form(self, section: str) -> dict[str, Any]:
        """The section's fields as the form shows them (secrets: ``(set)`` or empty)."""
        return {k: _as_form(v) for k, v in self.store.view()[section].items()}

    def save(self, section: str, values: Mapping[str, Any], actor: str) -> DirectorySettings:
        """Store a section from form values (an empty secret keeps the stored one);
        ``DirectorySettingsError`` names what is wrong, and nothing is stored then."""
        if section not in SECTIONS:
            raise DirectorySettingsError(f"no directory settings section {section!r}")
        typed = {}
        for key, text in values.items():
            if key in SECRETS[section] and text == "(set)":
                continue  # the placeholder shown for a stored secret: keep it
            typed[key] = (
                _from_form(_kind(section, key), text)
                if key in SECTIONS[section].model_fields
                else text
            )
        return self.store.update(section, typed, actor)

    def test(self, section: str, actor: str) -> tuple[bool, str]:
        """Test the provider with the settings in force; audited ``settings.directory.test``."""
        current = self.store.current()
        ok, detail = test_ldap(current.ldap) if section == "ldap" else test_oidc(current.oidc)
        with self.store.db.session() as s:
            s.add(
                AuditEvent(
                    actor=actor[:64],
                    action="settings.directory.test",
                    detail={"section": section, "ok": ok, "detail": detail[:300]},
                )
            )
        return ok, detail
