"""Doctor check of the company directory: with LDAP or OIDC enabled (in the config file or
from the admin console), the service account binds and reads the user base, and the OIDC
provider's discovery document and keys load."""

from __future__ import annotations

from appliance.core.config import AppConfig
from appliance.core.db.session import Database
from appliance.core.services.admin.directory import test_ldap, test_oidc
from appliance.ops.doctor_runtime import Check
from appliance.wiring.auth import directory_settings


def directory_check(config: AppConfig) -> Check:
    """One line per enabled provider; 'off' when neither is."""
    try:
        db = Database(config.database_url)
        try:
            current = directory_settings(config, db).current()
        finally:
            db.dispose()
    except Exception:  # noqa: BLE001 - the database check reports it; use the config file
        current = None
    ldap = current.ldap if current else config.ldap
    oidc = current.oidc if current else config.oidc
    if not ldap.enabled and not oidc.enabled:
        return Check("directory", True, "off: local accounts only (ldap and oidc disabled)")
    lines, ok = [], True
    for name, enabled, test in (
        ("ldap", ldap.enabled, lambda: test_ldap(ldap)),
        ("oidc", oidc.enabled, lambda: test_oidc(oidc)),
    ):
        if enabled:
            good, detail = test()
            ok &= good
            lines.append(f"{name} {'ok' if good else 'FAILED'}: {detail}")
    return Check("directory", ok, "; ".join(lines))
