"""Goodput and the cost per effective token over stored answers, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from appliance.core.config import SloConfig
from appliance.core.db.models import Conversation, Message, User
from appliance.core.db.session import Database
from appliance.core.services.admin.analytics import Analytics
from ui.admin.analytics import goodput_markdown


@pytest.fixture()
def db(db_url: str) -> Database:
    database = Database(db_url)
    database.migrate()
    yield database
    database.dispose()


def _answers(db: Database, rows: list[tuple[int, float | None, float | None, timedelta]]) -> None:
    with db.session() as s:
        user = User(username="timed", password_hash="x")
        s.add(user)
        s.flush()
        conv = Conversation(user_id=user.id)
        s.add(conv)
        s.flush()
        for tokens, ttft_ms, e2e_ms, age in rows:
            s.add(Message(conversation_id=conv.id, role="user", content="q"))
            s.add(
                Message(
                    conversation_id=conv.id,
                    role="assistant",
                    content="a",
                    completion_tokens=tokens,
                    ttft_ms=ttft_ms,
                    e2e_ms=e2e_ms,
                    created_at=datetime.now(UTC) - age,
                )
            )
        s.commit()


def test_goodput_counts_the_answers_within_the_objective(db: Database) -> None:
    now = timedelta(0)
    _answers(
        db,
        [
            (11, 500.0, 1500.0, now),  # ITL 100 ms: good
            (21, 2500.0, 3500.0, now),  # TTFT 2.5 s: not good
            (11, 400.0, 3400.0, now),  # ITL 300 ms: not good
            (5, None, None, now),  # extractive (not timed): left out
            (9, 100.0, 500.0, timedelta(hours=30)),  # outside the window
        ],
    )
    g = Analytics(db, SloConfig(machine_hour_price=2.0)).goodput(hours=24)
    assert (g["answers"], g["answers_met"]) == (3, 1)
    assert (g["good_tokens"], g["output_tokens"]) == (11, 43)
    assert g["cost_per_million"] == pytest.approx(2.0 * 24 / 11 * 1e6)
    text = goodput_markdown(g)
    assert "11 of 43 output tokens" in text and "cost per million" in text
    assert Analytics(db).goodput()["cost_per_million"] is None  # no price configured
