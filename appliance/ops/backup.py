"""``appliance backup`` / ``appliance restore``: the database, the index and the config in one
``.tar.gz`` with a manifest and SHA-256 checksums.

Archive layout::

    manifest.json           format, app version, database kind and revision, row counts, sha256s
    database/appliance.sqlite   SQLite: a consistent copy made with SQLite's online backup API
    database/rows.jsonl         PostgreSQL: every row, read in one REPEATABLE READ snapshot
    index/...                   the FAISS and BM25 files (each replaced atomically by the app)
    config/appliance.toml       the config file, when the command was given one

The index is copied after the database snapshot; the app's start-up ``reconcile`` makes both
indexes hold exactly the database's chunks, so a chunk added in between is healed, not lost.
Restore refuses a target that already holds data unless ``force`` is set.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import tarfile
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import create_engine, inspect
from sqlalchemy.engine import make_url

from appliance.core.config import AppConfig
from appliance.core.db import copy as db_copy
from appliance.core.db.session import Database, current_revision, make_engine

FORMAT = 1
MANIFEST = "manifest.json"
SQLITE_NAME = "database/appliance.sqlite"
ROWS_NAME = "database/rows.jsonl"
CONFIG_NAME = "config/appliance.toml"


class BackupError(RuntimeError):
    """A backup or restore that cannot go ahead; the message says what to do."""


@dataclass(frozen=True)
class BackupResult:
    path: Path
    database: str
    rows: dict[str, int]
    index_files: int


def sha256_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def sqlite_path(url: str) -> Path | None:
    """The file behind a SQLite URL, else None."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return None
    return Path(parsed.database)


def _app_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rag-appliance")
    except PackageNotFoundError:
        return "unknown"


def _index_files(index_dir: Path) -> list[Path]:
    """Index files, without the temporary files of an atomic write in progress."""
    if not index_dir.is_dir():
        return []
    return sorted(p for p in index_dir.rglob("*") if p.is_file() and not p.name.startswith("."))


def create_backup(config: AppConfig, out: Path, config_file: Path | None = None) -> BackupResult:
    """Write a backup archive to ``out`` (atomically: a partial archive never has its name)."""
    url = config.database_url
    src_sqlite = sqlite_path(url)
    with tempfile.TemporaryDirectory(prefix="appliance-backup-") as tmp_name:
        stage = Path(tmp_name)
        (stage / "database").mkdir()
        engine = make_engine(url)
        try:
            revision = current_revision(engine)
            if revision is None:
                raise BackupError(f"{url} has no appliance schema: nothing to back up")
            if src_sqlite is not None:
                kind = "sqlite"
                _sqlite_online_copy(src_sqlite, stage / SQLITE_NAME)
                rows = _sqlite_counts(stage / SQLITE_NAME)
            else:
                kind = "rows"
                with open(stage / ROWS_NAME, "w", encoding="utf-8") as fh:
                    rows = db_copy.dump_rows(engine, fh)
        finally:
            engine.dispose()
        index_dir = config.paths.index_dir
        index = _index_files(index_dir)
        for path in index:
            target = stage / "index" / path.relative_to(index_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        if config_file is not None and config_file.is_file():
            (stage / "config").mkdir()
            shutil.copy2(config_file, stage / CONFIG_NAME)
        files = {
            str(p.relative_to(stage)): sha256_file(p)
            for p in sorted(stage.rglob("*"))
            if p.is_file()
        }
        manifest = {
            "format": FORMAT,
            "app_version": _app_version(),
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "database": {"kind": kind, "dialect": make_url(url).get_backend_name()},
            "revision": revision,
            "rows": rows,
            "files": files,
        }
        (stage / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
        os.close(fd)
        try:
            with tarfile.open(partial, "w:gz") as tar:
                tar.add(stage / MANIFEST, arcname=MANIFEST)
                for name in files:
                    tar.add(stage / name, arcname=name)
            os.chmod(partial, 0o600)  # the database holds password hashes
            os.replace(partial, out)
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
    return BackupResult(out, kind, rows, len(index))


def _sqlite_online_copy(src: Path, dst: Path) -> None:
    if not src.is_file():
        raise BackupError(f"database file {src} does not exist")
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True, timeout=30)
    target = sqlite3.connect(dst)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def _sqlite_counts(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(path)
    try:
        return {
            t.name: conn.execute(f'SELECT COUNT(*) FROM "{t.name}"').fetchone()[0]
            for t in db_copy.tables()
        }
    finally:
        conn.close()


# ---- restore -------------------------------------------------------------------------------


def read_archive(archive: Path, into: Path) -> dict:
    """Extract ``archive`` into ``into`` and verify every checksum; return the manifest."""
    if not archive.is_file():
        raise BackupError(f"{archive}: no such backup file")
    try:
        with tarfile.open(archive, "r:gz") as tar:
            tar.extractall(into, filter="data")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise BackupError(f"{archive} is not a readable backup: {exc}") from exc
    try:
        manifest = json.loads((into / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BackupError(f"{archive}: missing or damaged manifest: {exc}") from exc
    if manifest.get("format") != FORMAT:
        raise BackupError(f"{archive}: backup format {manifest.get('format')} is not supported")
    for name, digest in manifest["files"].items():
        path = into / name
        if not path.is_file() or sha256_file(path) != digest:
            raise BackupError(f"{archive}: {name} fails its checksum; the backup is damaged")
    return manifest


def target_has_data(config: AppConfig) -> list[str]:
    """What already lives where a restore would write (empty list: safe to restore)."""
    found = []
    engine = make_engine(config.database_url)
    try:
        if current_revision(engine) is not None and db_copy.row_count(engine) > 0:
            found.append(f"the database {config.database_url} holds rows")
        elif current_revision(engine) is None and inspect(engine).get_table_names():
            found.append(f"the database {config.database_url} holds other tables")
    finally:
        engine.dispose()
    if _index_files(config.paths.index_dir):
        found.append(f"the index directory {config.paths.index_dir} holds files")
    return found


def restore_backup(
    config: AppConfig, archive: Path, *, force: bool = False, config_out: Path | None = None
) -> dict:
    """Restore the database and the index of ``archive`` into the places ``config`` names.

    The archived config file is written to ``config_out`` (never over an existing file unless
    ``force``). Returns the manifest.
    """
    with tempfile.TemporaryDirectory(prefix="appliance-restore-") as tmp_name:
        stage = Path(tmp_name)
        manifest = read_archive(archive, stage)
        busy = target_has_data(config)
        if busy and not force:
            raise BackupError(
                "refusing to overwrite: " + "; ".join(busy) + ". Restore into an empty data "
                "dir and database, or pass --force to replace them"
            )
        config.paths.data_dir.mkdir(parents=True, exist_ok=True)
        _restore_database(config, stage, manifest, replace=bool(busy))
        _restore_index(config.paths.index_dir, stage / "index")
        if config_out is not None and (stage / CONFIG_NAME).is_file():
            if config_out.exists() and not force:
                raise BackupError(f"{config_out} exists; pass --force to overwrite it")
            config_out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(stage / CONFIG_NAME, config_out)
    return manifest


def _restore_database(config: AppConfig, stage: Path, manifest: dict, replace: bool) -> None:
    url = config.database_url
    target_file = sqlite_path(url)
    kind = manifest["database"]["kind"]
    if kind == "sqlite":
        source = stage / SQLITE_NAME
        # bring an older backup's schema up to this version's head before copying rows over
        Database(f"sqlite:///{source}").migrate()
        if target_file is not None:
            target_file.parent.mkdir(parents=True, exist_ok=True)
            for suffix in ("-wal", "-shm"):
                Path(f"{target_file}{suffix}").unlink(missing_ok=True)
            partial = target_file.with_name(f".{target_file.name}.restore")
            shutil.copyfile(source, partial)
            os.replace(partial, target_file)
            return
        src_engine = create_engine(f"sqlite:///{source}")
        try:
            _load(config, db_copy.rows_of(src_engine), replace)
        finally:
            src_engine.dispose()
        return
    from alembic.script import ScriptDirectory

    from appliance.core.db.session import MIGRATIONS_DIR

    head = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
    if manifest["revision"] != head:
        raise BackupError(
            f"this row backup is at schema {manifest['revision']}, this version at {head}: "
            "restore it with the version that made it, then upgrade"
        )
    if target_file is not None:
        target_file.unlink(missing_ok=True)
    with open(stage / ROWS_NAME, encoding="utf-8") as fh:
        _load(config, db_copy.read_rows(iter(fh)), replace)


def _load(config: AppConfig, rows, replace: bool) -> None:  # noqa: ANN001
    db = Database(config.database_url)
    try:
        db.migrate()
        if replace:
            with db.engine.begin() as conn:
                for table in reversed(db_copy.tables()):
                    conn.execute(table.delete())
        db_copy.load_rows(db.engine, rows)
    finally:
        db.dispose()


def _restore_index(index_dir: Path, source: Path) -> None:
    if index_dir.exists():
        shutil.rmtree(index_dir)
    if source.is_dir():
        shutil.copytree(source, index_dir)
    else:
        index_dir.mkdir(parents=True, exist_ok=True)
