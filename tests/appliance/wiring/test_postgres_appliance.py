"""The whole appliance on PostgreSQL: start-up (migrations, first admin, sample corpus), a
chat turn stored with its metrics, and a restart that finds everything in place."""

from __future__ import annotations

from pathlib import Path

from appliance.core.services.chat import DoneEvent
from appliance.core.services.conversations import ConversationService
from appliance.wiring.appliance import build_appliance


def test_appliance_runs_on_postgresql(
    pg_url: str, tmp_path: Path, model_dir, engine, embedder, config_for
) -> None:  # noqa: ANN001
    config = config_for(tmp_path, model_dir, database={"url": pg_url})
    first = build_appliance(config, engine=engine, embedder=embedder)
    try:
        assert first.first_admin_password
        admin = first.auth.principal_for("admin")
        events = list(first.chat.ask(admin, "What is the helpdesk phone extension?"))
        done = events[-1]
        assert isinstance(done, DoneEvent)
        assert done.stats.prompt_tokens > 0
        documents = first.ingest.document_count()
        assert documents >= 8
    finally:
        first.db.dispose()
    # a restart on the same database and data dir: no second admin, no re-ingest, same turn
    again = build_appliance(config, engine=engine, embedder=embedder)
    try:
        assert again.first_admin_password is None
        assert again.ingest.document_count() == documents
        admin = again.auth.principal_for("admin")
        stored = ConversationService(again.db, again.chat).messages(admin, done.conversation_id)
        assert stored[1].content == done.answer
        assert stored[1].prompt_tokens == done.stats.prompt_tokens
    finally:
        again.db.dispose()
