"""The audit log for admins: filtered queries and a CSV export (read-only)."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime

from sqlalchemy import or_, select

from appliance.core.db.models import AuditEvent
from appliance.core.db.session import Database

# what the console's filter offers, as action prefixes
CATEGORIES: dict[str, tuple[str, ...]] = {
    "all": (),
    "logins": ("login",),
    "admin actions": ("admin.", "settings.", "collection.", "user.", "api_key."),
    "documents": ("document.",),
}
CSV_FIELDS = ("id", "at", "actor", "action", "detail")
MAX_ROWS = 10_000


def _iso(at: datetime) -> str:
    at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return at.isoformat(timespec="seconds")


class AuditLog:
    def __init__(self, db: Database) -> None:
        self.db = db

    def query(self, category: str = "all", actor: str = "", limit: int = 500) -> list[dict]:
        """Newest first. ``category`` is a key of ``CATEGORIES``; ``actor`` an exact name."""
        if category not in CATEGORIES:
            raise ValueError(f"category must be one of {', '.join(CATEGORIES)}")
        stmt = select(AuditEvent).order_by(AuditEvent.id.desc())
        prefixes = CATEGORIES[category]
        if prefixes:
            stmt = stmt.where(or_(*(AuditEvent.action.startswith(p) for p in prefixes)))
        if actor.strip():
            stmt = stmt.where(AuditEvent.actor == actor.strip())
        stmt = stmt.limit(max(1, min(int(limit), MAX_ROWS)))
        with self.db.session() as s:
            return [
                {
                    "id": e.id,
                    "at": _iso(e.at),
                    "actor": e.actor,
                    "action": e.action,
                    "detail": json.dumps(e.detail, ensure_ascii=False) if e.detail else "",
                }
                for e in s.scalars(stmt)
            ]

    def csv(self, category: str = "all", actor: str = "") -> str:
        """The filtered log as CSV (header + rows, newest first, at most ``MAX_ROWS``)."""
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=CSV_FIELDS, lineterminator="\n")
        writer.writeheader()
        for row in self.query(category, actor, MAX_ROWS):
            writer.writerow({k: _defuse(v) for k, v in row.items()})
        return out.getvalue()


def _defuse(value: object) -> object:
    """Keep spreadsheet apps from running a cell as a formula (CSV injection)."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value
