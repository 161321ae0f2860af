"""Runtime chat settings: validation (pure) and the audited, DB-backed service."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from appliance.core.db.models import AuditEvent
from appliance.core.db.session import Database
from appliance.core.services.settings import (
    ChatSettings,
    SettingsError,
    SettingsService,
    apply_changes,
)

DEFAULTS = ChatSettings(
    system_prompt="Answer from the documents.",
    top_k=4,
    ordering="relevance",
    temperature=0.0,
    max_new_tokens=256,
)
STRATEGIES = ["relevance", "doc_id"]


def test_valid_changes_are_applied_and_coerced() -> None:
    out = apply_changes(DEFAULTS, {"top_k": "6", "temperature": 0.7}, STRATEGIES, 1024)
    assert out.top_k == 6 and out.temperature == 0.7
    assert out.system_prompt == DEFAULTS.system_prompt


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"top_k": 0}, "top_k"),
        ({"top_k": "many"}, "top_k"),
        ({"temperature": 3}, "temperature"),
        ({"ordering": "random"}, "ordering"),
        ({"max_new_tokens": 5000}, "max_new_tokens"),
        ({"system_prompt": "   "}, "system_prompt"),
        ({"turbo": True}, "unknown setting"),
    ],
)
def test_bad_values_are_refused_with_the_key_named(changes: dict, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        apply_changes(DEFAULTS, changes, STRATEGIES, 1024)


@pytest.fixture
def service(tmp_path: Path) -> SettingsService:
    db = Database(f"sqlite:///{tmp_path / 'settings.db'}")
    db.migrate()
    yield SettingsService(db, DEFAULTS, STRATEGIES, 1024)
    db.dispose()


def test_update_is_stored_audited_and_seen_by_a_second_service(service: SettingsService) -> None:
    after = service.update("root", {"top_k": 8, "ordering": "doc_id"})
    assert (after.top_k, after.ordering) == (8, "doc_id")
    # another worker reading the same database sees the change on its next turn
    other = SettingsService(service.db, DEFAULTS, STRATEGIES, 1024)
    assert other.current() == after
    with service.db.session() as s:
        events = s.scalars(select(AuditEvent).where(AuditEvent.action == "settings.update"))
        [event] = list(events)
        assert event.actor == "root"
        assert event.detail == {"top_k": [4, 8], "ordering": ["relevance", "doc_id"]}


def test_a_refused_update_changes_nothing(service: SettingsService) -> None:
    with pytest.raises(SettingsError):
        service.update("root", {"top_k": 8, "temperature": -1})
    assert service.current() == DEFAULTS


def test_a_stored_strategy_that_is_no_longer_installed_falls_back(service: SettingsService) -> None:
    service.update("root", {"ordering": "doc_id"})
    fewer = SettingsService(service.db, DEFAULTS, ["relevance"], 1024)
    assert fewer.current().ordering == "relevance"
