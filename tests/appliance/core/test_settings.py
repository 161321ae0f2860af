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
    assert DEFAULTS.stop_repeats
    assert not apply_changes(DEFAULTS, {"stop_repeats": False}, STRATEGIES, 1024).stop_repeats


def test_repetition_control_takes_sglangs_ranges() -> None:
    changes = {
        "frequency_penalty": "-2",
        "presence_penalty": 2,
        "repetition_penalty": "2.0",
        "min_p": 1,
        "sampling_top_k": "40",
        "min_new_tokens": 256,
    }
    out = apply_changes(DEFAULTS, changes, STRATEGIES, 1024)
    assert (out.frequency_penalty, out.presence_penalty, out.repetition_penalty) == (-2, 2, 2)
    assert (out.min_p, out.sampling_top_k, out.min_new_tokens) == (1.0, 40, 256)
    assert apply_changes(DEFAULTS, {"sampling_top_k": -1}, STRATEGIES, 1024).sampling_top_k == -1


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
        ({"frequency_penalty": 2.5}, r"frequency_penalty: must be in \[-2, 2\]"),
        ({"presence_penalty": -3}, r"presence_penalty: must be in \[-2, 2\]"),
        ({"repetition_penalty": 0}, r"repetition_penalty: must be in \(0, 2\]"),
        ({"repetition_penalty": "nan"}, "repetition_penalty"),
        ({"min_p": 1.5}, r"min_p: must be in \[0, 1\]"),
        ({"sampling_top_k": 0}, "sampling_top_k: must be -1"),
        ({"min_new_tokens": -1}, "min_new_tokens"),
        ({"min_new_tokens": 300}, "min_new_tokens: must not exceed max_new_tokens"),
        ({"max_new_tokens": 4, "min_new_tokens": 8}, "min_new_tokens: must not exceed"),
        ({"stop_repeats": "yes"}, "stop_repeats: must be true or false"),
        ({"stop_repeats": 1}, "stop_repeats: must be true or false"),
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


def test_penalty_changes_are_audited_with_old_and_new_values(service: SettingsService) -> None:
    after = service.update("root", {"repetition_penalty": 1.3, "frequency_penalty": 0.2})
    assert service.current() == after
    with service.db.session() as s:
        [event] = list(s.scalars(select(AuditEvent).where(AuditEvent.action == "settings.update")))
        assert event.detail == {
            "repetition_penalty": [DEFAULTS.repetition_penalty, 1.3],
            "frequency_penalty": [0.0, 0.2],
        }


def test_a_refused_update_changes_nothing(service: SettingsService) -> None:
    with pytest.raises(SettingsError):
        service.update("root", {"top_k": 8, "temperature": -1})
    assert service.current() == DEFAULTS


def test_a_stored_strategy_that_is_no_longer_installed_falls_back(service: SettingsService) -> None:
    service.update("root", {"ordering": "doc_id"})
    fewer = SettingsService(service.db, DEFAULTS, ["relevance"], 1024)
    assert fewer.current().ordering == "relevance"
