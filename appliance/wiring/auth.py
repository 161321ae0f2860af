"""Sign-in's wiring: local accounts, and the company directory (LDAP, OIDC) with its settings
as the config file gives them, overridden from the admin console."""

from __future__ import annotations

from appliance.core.auth.directory_accounts import DirectorySettings
from appliance.core.auth.directory_signin import DirectorySignIn
from appliance.core.auth.service import AuthService
from appliance.core.auth.throttle import ThrottlePolicy
from appliance.core.config import AppConfig
from appliance.core.db.session import Database
from appliance.core.services.directory_settings import DirectorySettingsStore


def directory_settings(config: AppConfig, db: Database) -> DirectorySettingsStore:
    """The directory settings in force over ``config``'s sections."""
    return DirectorySettingsStore(db, DirectorySettings(config.ldap, config.oidc, config.directory))


def build_auth(config: AppConfig, db: Database, store: DirectorySettingsStore) -> AuthService:
    """Accounts, sessions and the login throttle, with directory sign-in over ``store``."""
    sec = config.security
    directory = DirectorySignIn(db, store.current)
    return AuthService(db, sec.session_ttl_hours, ThrottlePolicy.from_config(sec), directory)
