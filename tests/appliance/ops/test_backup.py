"""``appliance backup`` / ``appliance restore``: a real appliance (SQLite, FAISS, the real
model) with real conversations; backed up, restored into an empty data dir (and into
PostgreSQL), it gives back the same conversations and the same retrieval results."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from appliance.core.services.chat import DoneEvent
from appliance.core.services.conversations import ConversationService
from appliance.core.services.knowledge import KnowledgeBase
from appliance.ops.backup import BackupError, create_backup, restore_backup
from appliance.wiring.appliance import build_appliance

QUESTIONS = ("How do I reset my VPN password?", "What is the IT helpdesk phone extension?")


def cli(*args: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    return subprocess.run(
        [sys.executable, "-m", "appliance.cli", *args],
        capture_output=True,
        text=True,
        env=clean,
        timeout=300,
    )


@pytest.fixture(scope="module")
def source(tmp_path_factory, model_dir, engine, embedder, config_for):  # noqa: ANN001, ANN201
    """An appliance with the sample corpus and two conversations (one with a follow-up)."""
    root = tmp_path_factory.mktemp("backup-src")
    config = config_for(root / "data", model_dir)
    app = build_appliance(config, engine=engine, embedder=embedder)
    admin = app.auth.principal_for("admin")
    first = list(app.chat.ask(admin, QUESTIONS[0]))[-1]
    assert isinstance(first, DoneEvent)
    assert isinstance(
        list(app.chat.ask(admin, "And on a phone?", first.conversation_id))[-1], DoneEvent
    )
    assert isinstance(list(app.chat.ask(admin, QUESTIONS[1]))[-1], DoneEvent)
    toml = root / "appliance.toml"
    toml.write_text(
        f'[paths]\ndata_dir = "{config.paths.data_dir}"\n[engine]\nmodel_path = "{model_dir}"\n',
        encoding="utf-8",
    )
    yield app, config, toml
    app.db.dispose()


def snapshot(app) -> dict:  # noqa: ANN001
    """Every conversation of the admin with its messages, and the retrieval of each question."""
    admin = app.auth.principal_for("admin")
    convs = ConversationService(app.db, app.chat)
    conversations = {c.id: (c.title, convs.messages(admin, c.id)) for c in convs.list(admin)}
    retrieval = {}
    for q in QUESTIONS:
        hits, _ms = app.knowledge.retrieve(q, 4, None)
        retrieval[q] = [(h.chunk_id, round(h.score, 6)) for h in hits]
    return {"conversations": conversations, "retrieval": retrieval}


def reopen(config, engine, embedder):  # noqa: ANN001, ANN201
    return build_appliance(config, engine=engine, embedder=embedder)


def test_backup_then_restore_into_an_empty_data_dir(
    source,
    tmp_path: Path,
    engine,
    embedder,
    config_for,
    model_dir,  # noqa: ANN001
) -> None:
    app, config, toml = source
    before = snapshot(app)
    assert len(before["conversations"]) == 2
    archive = tmp_path / "b.tar.gz"
    out = cli("--config", str(toml), "backup", "--out", str(archive))
    assert out.returncode == 0, out.stderr
    assert "backup written" in out.stdout and "conversations" in out.stdout
    assert oct(archive.stat().st_mode & 0o777) == "0o600"

    target = tmp_path / "restored"
    target_toml = tmp_path / "target.toml"
    target_toml.write_text(f'[paths]\ndata_dir = "{target}"\n', encoding="utf-8")
    done = cli(
        "--config",
        str(target_toml),
        "restore",
        str(archive),
        "--config-out",
        str(tmp_path / "old.toml"),
    )
    assert done.returncode == 0, done.stderr
    assert "2 conversations" in done.stdout
    assert (tmp_path / "old.toml").read_text() == toml.read_text()

    restored_config = config_for(target, model_dir)
    restored = reopen(restored_config, engine, embedder)
    try:
        assert snapshot(restored) == before
        assert restored.knowledge.reconcile() == (0, 0)  # the index came back whole
    finally:
        restored.db.dispose()

    again = cli("--config", str(target_toml), "restore", str(archive))
    assert again.returncode == 1 and "refusing to overwrite" in again.stderr
    assert "--force" in again.stderr
    forced = cli("--config", str(target_toml), "restore", str(archive), "--force")
    assert forced.returncode == 0, forced.stderr


def test_damaged_or_foreign_archives_are_refused(source, tmp_path: Path) -> None:  # noqa: ANN001
    _app, config, _toml = source
    archive = create_backup(config, tmp_path / "ok.tar.gz").path
    # rewrite the archive with one byte of the database flipped: the checksum catches it
    damaged = tmp_path / "damaged.tar.gz"
    with tarfile.open(archive) as src, tarfile.open(damaged, "w:gz") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read()
            if member.name.startswith("database/"):
                data = data[:100] + bytes([data[100] ^ 1]) + data[101:]
            dst.addfile(member, io.BytesIO(data))
    empty = config.model_copy(
        update={"paths": config.paths.model_copy(update={"data_dir": tmp_path / "empty"})}
    )
    with pytest.raises(BackupError, match="fails its checksum"):
        restore_backup(empty, damaged)
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(gzip.compress(b"not a tar file"))
    with pytest.raises(BackupError, match="not a readable backup"):
        restore_backup(empty, junk)
    with pytest.raises(BackupError, match="no such backup"):
        restore_backup(empty, tmp_path / "missing.tar.gz")
    assert not (tmp_path / "empty" / "index").exists()  # nothing was written


@pytest.mark.postgres
def test_sqlite_backup_restores_into_postgresql_and_back(
    source,
    tmp_path: Path,
    pg_url: str,
    engine,
    embedder,
    config_for,
    model_dir,  # noqa: ANN001
) -> None:
    app, config, _toml = source
    before = snapshot(app)
    archive = create_backup(config, tmp_path / "sqlite.tar.gz").path
    pg_config = config_for(tmp_path / "pg", model_dir, database={"url": pg_url})
    restore_backup(pg_config, archive)
    on_pg = reopen(pg_config, engine, embedder)
    try:
        assert snapshot(on_pg) == before
        # PostgreSQL sequences were moved past the restored ids: new rows still insert
        admin = on_pg.auth.principal_for("admin")
        assert isinstance(list(on_pg.chat.ask(admin, QUESTIONS[1]))[-1], DoneEvent)
    finally:
        on_pg.db.dispose()
    # a PostgreSQL backup (a row dump read in one snapshot) restores into SQLite
    rows_archive = create_backup(pg_config, tmp_path / "pg.tar.gz")
    assert rows_archive.database == "rows" and rows_archive.rows["conversations"] == 3
    back = config_for(tmp_path / "back", model_dir)
    restore_backup(back, rows_archive.path)
    restored = reopen(back, engine, embedder)
    try:
        admin = restored.auth.principal_for("admin")
        convs = ConversationService(restored.db, restored.chat).list(admin)
        assert len(convs) == 3
    finally:
        restored.db.dispose()


def test_knowledge_base_reads_the_restored_index_without_reembedding(
    source,
    tmp_path: Path,
    embedder,  # noqa: ANN001
) -> None:
    app, config, _toml = source
    archive = create_backup(config, tmp_path / "b.tar.gz").path
    target = config.model_copy(
        update={"paths": config.paths.model_copy(update={"data_dir": tmp_path / "t"})}
    )
    restore_backup(target, archive)
    from appliance.core.db.session import Database

    db = Database(target.database_url)
    try:
        kb = KnowledgeBase(db, embedder, target.paths.index_dir)
        assert kb.index.size == app.knowledge.index.size > 0
        assert kb.reconcile() == (0, 0)
    finally:
        db.dispose()
