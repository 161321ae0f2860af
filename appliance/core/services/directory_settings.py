"""The company directory's settings in force: the ``[ldap]``, ``[oidc]`` and ``[directory]``
config sections, overridden from the admin console without a restart.

Secrets (the LDAP service password, the OIDC client secret) are write-only: ``view`` says only
whether one is set, and an empty value in an update keeps the stored one. Each change is
validated as a whole section (a half-valid section is never stored) and written together with
its audit event, which names the changed keys, never a secret's value.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from appliance.core.auth.directory_accounts import DirectorySettings
from appliance.core.db.models import AuditEvent, Setting, utcnow
from appliance.core.db.session import Database
from appliance.core.directory_config import DirectoryConfig, LdapConfig, OidcConfig

SECTIONS: dict[str, type[BaseModel]] = {
    "ldap": LdapConfig,
    "oidc": OidcConfig,
    "directory": DirectoryConfig,
}
SECRETS = {"ldap": ("bind_password",), "oidc": ("client_secret",), "directory": ()}
_KEY = "directory.{}"  # one settings row per section: its overrides as a JSON object
CACHE_S = 2.0  # every sign-in and account check reads the settings; the database at most this


class DirectorySettingsError(ValueError):
    """A directory setting that cannot be applied; the message names the key."""


def _message(section: str, exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "(section)"
    return f"{section}.{where}: {first.get('msg', 'invalid')}".replace("Value error, ", "")


class DirectorySettingsStore:
    """The directory settings of one database over the config file's (``base``)."""

    def __init__(
        self,
        db: Database,
        base: DirectorySettings,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.db = db
        self.base = base
        self.clock = clock
        self._cached: tuple[float, DirectorySettings] | None = None

    def _overrides(self) -> dict[str, dict[str, Any]]:
        with self.db.session() as s:
            rows = {
                r.key: r.value for r in s.query(Setting).filter(Setting.key.like("directory.%"))
            }
        return {name: dict(rows.get(_KEY.format(name)) or {}) for name in SECTIONS}

    def _build(self, overrides: Mapping[str, Mapping[str, Any]]) -> DirectorySettings:
        made: dict[str, BaseModel] = {}
        for name, model in SECTIONS.items():
            merged = getattr(self.base, _field(name)).model_dump() | dict(overrides.get(name, {}))
            try:
                made[name] = model.model_validate(merged)
            except ValidationError as exc:
                raise DirectorySettingsError(_message(name, exc)) from None
        return DirectorySettings(made["ldap"], made["oidc"], made["directory"])  # type: ignore[arg-type]

    def current(self) -> DirectorySettings:
        """The settings in force (read at most every ``CACHE_S`` seconds)."""
        now = self.clock()
        if self._cached is not None and now - self._cached[0] < CACHE_S:
            return self._cached[1]
        try:
            settings = self._build(self._overrides())
        except DirectorySettingsError:
            settings = self.base  # stored overrides a later release no longer accepts
        self._cached = (now, settings)
        return settings

    def view(self) -> dict[str, dict[str, Any]]:
        """Each section as the console shows it: secrets as ``"(set)"`` or ``""``."""
        settings = self.current()
        shown: dict[str, dict[str, Any]] = {}
        for name in SECTIONS:
            values = getattr(settings, _field(name)).model_dump(mode="json")
            for secret in SECRETS[name]:
                values[secret] = "(set)" if values[secret] else ""
            shown[name] = values
        return shown

    def update(self, section: str, values: Mapping[str, Any], actor: str) -> DirectorySettings:
        """Change keys of one section (validated with the rest of it); an empty secret keeps
        the stored one. Audited as ``settings.directory``."""
        if section not in SECTIONS:
            raise DirectorySettingsError(f"no directory settings section {section!r}")
        model = SECTIONS[section]
        unknown = sorted(set(values) - set(model.model_fields))
        if unknown:
            raise DirectorySettingsError(f"{section}: unknown setting {unknown[0]!r}")
        changes = {
            k: v for k, v in values.items() if not (k in SECRETS[section] and v in ("", None))
        }
        overrides = self._overrides()
        overrides[section] = overrides[section] | changes
        settings = self._build(overrides)  # raises before anything is stored
        with self.db.session() as s:
            key = _KEY.format(section)
            row = s.get(Setting, key)
            if row is None:
                s.add(Setting(key=key, value=overrides[section], updated_by=actor[:64]))
            else:
                row.value, row.updated_at, row.updated_by = overrides[section], utcnow(), actor[:64]
            detail = {"section": section, "keys": sorted(changes)}
            s.add(AuditEvent(actor=actor[:64], action="settings.directory", detail=detail))
        self._cached = None
        return settings


def _field(section: str) -> str:
    return {"ldap": "ldap", "oidc": "oidc", "directory": "mapping"}[section]
