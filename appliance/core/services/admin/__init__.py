"""Admin console services: documents, users, analytics, audit, engine status and live metrics,
capacity planning. ``build_admin(...)`` wires them over the core's parts.

The services do not check roles: every caller (Gradio handler, REST endpoint) checks that
the principal is an admin first, on the server, per call.
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.core.auth.service import AuthService
from appliance.core.config import AppConfig
from appliance.core.db.session import Database
from appliance.core.services.admin.analytics import Analytics
from appliance.core.services.admin.audit import AuditLog
from appliance.core.services.admin.directory import AdminDirectory
from appliance.core.services.admin.documents import AdminDocuments, AdminError, Upload
from appliance.core.services.admin.engine_status import EngineStatus
from appliance.core.services.admin.sampler import MetricsSampler
from appliance.core.services.admin.users import AdminUsers
from appliance.core.services.directory_settings import DirectorySettingsStore
from appliance.core.services.ingest import IngestService
from appliance.core.services.knowledge import KnowledgeBase
from appliance.core.services.settings import SettingsService
from engine.base import Engine

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
    directory: AdminDirectory | None = None  # sign-in settings (LDAP, OIDC, group mapping)


def build_admin(
    config: AppConfig,
    db: Database,
    auth: AuthService,
    engine: Engine,
    knowledge: KnowledgeBase,
    ingest: IngestService,
    settings: SettingsService,
    sample_interval_s: float = 5.0,
    directory: DirectorySettingsStore | None = None,
) -> AdminConsole:
    """The admin services over the core's DB, auth, indexes, engine and settings."""
    return AdminConsole(
        auth=auth,
        documents=AdminDocuments(ingest, knowledge),
        users=AdminUsers(auth),
        analytics=Analytics(db, config.slo),
        audit=AuditLog(db),
        engine=EngineStatus(engine, config, db),
        sampler=MetricsSampler(engine, db, interval_s=sample_interval_s),
        settings=settings,
        directory=AdminDirectory(directory) if directory else None,
    )
