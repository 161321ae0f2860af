"""Admin console services: documents, users, analytics, audit, engine status and live metrics,
capacity planning. ``build_admin(appliance)`` wires them from a built appliance.

The services do not check roles: every caller (Gradio handler, REST endpoint) checks that
the principal is an admin first, on the server, per call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from appliance.services.admin.analytics import Analytics
from appliance.services.admin.audit import AuditLog
from appliance.services.admin.documents import AdminDocuments, AdminError, Upload
from appliance.services.admin.engine_status import EngineStatus
from appliance.services.admin.sampler import MetricsSampler
from appliance.services.admin.users import AdminUsers

if TYPE_CHECKING:
    from appliance.app import Appliance
    from appliance.auth import AuthService
    from appliance.services.settings import SettingsService

__all__ = ["AdminConsole", "AdminError", "Upload", "build_admin"]


@dataclass
class AdminConsole:
    auth: AuthService
    documents: AdminDocuments
    users: AdminUsers
    analytics: Analytics
    audit: AuditLog
    engine: EngineStatus
    sampler: MetricsSampler
    settings: SettingsService


def build_admin(appliance: Appliance, sample_interval_s: float = 5.0) -> AdminConsole:
    """The admin services over ``appliance``'s DB, auth, indexes, engine and settings."""
    db = appliance.db
    return AdminConsole(
        auth=appliance.auth,
        documents=AdminDocuments(appliance.ingest, appliance.knowledge),
        users=AdminUsers(appliance.auth),
        analytics=Analytics(db),
        audit=AuditLog(db),
        engine=EngineStatus(appliance.engine, appliance.config, db),
        sampler=MetricsSampler(appliance.engine, db, interval_s=sample_interval_s),
        settings=appliance.settings,
    )
