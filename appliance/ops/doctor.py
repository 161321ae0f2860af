"""``appliance doctor``: checks that tell the admin what is wrong and what to do about it."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import func, select

from appliance.core.config import AppConfig
from appliance.ops.doctor_directory import directory_check
from appliance.ops.doctor_gateway import gateway_check
from appliance.ops.doctor_ocr import ocr_check
from appliance.ops.doctor_runtime import (
    Check,
    app_check,
    engine_check,
    gpu_check,
    index_check,
)

__all__ = ["CHECKS", "Check", "run_checks"]


def _database(config: AppConfig) -> Check:
    from alembic.script import ScriptDirectory

    from appliance.core.db.models import Chunk
    from appliance.core.db.session import MIGRATIONS_DIR, Database, current_revision

    head = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
    try:
        db = Database(config.database_url)
        rev = current_revision(db.engine)
        chunks = None
        if rev == head:
            with db.session() as s:
                chunks = s.scalar(select(func.count(Chunk.id)))
        db.dispose()
    except Exception as exc:  # any driver error is a finding, not a crash
        return Check(
            "database", False, f"cannot use {config.database_url}: {exc}. Fix database.url"
        )
    if rev != head:
        return Check(
            "database", False, f"schema at {rev}, expected {head}: start `appliance serve` once"
        )
    return Check("database", True, f"schema {rev}, {chunks} chunks")


def _model(config: AppConfig) -> Check:
    from engine.embedded.model_store import DEFAULT_MODEL_NAME, bundled_gguf, is_prepared

    if config.engine.model_path:
        ok = Path(config.engine.model_path, "config.json").is_file()
        detail = config.engine.model_path + (
            "" if ok else ": no config.json; fix engine.model_path"
        )
        return Check("model", ok, detail)
    target = config.paths.models_dir / DEFAULT_MODEL_NAME
    if is_prepared(target):
        return Check("model", True, str(target))
    try:
        bundled_gguf()
    except FileNotFoundError as exc:
        return Check("model", False, str(exc))
    return Check(
        "model", True, "not prepared yet: the first `appliance serve` converts it (~1 min)"
    )


def _embeddings(config: AppConfig) -> Check:
    from rag.embeddings import default_model_dir

    try:
        path = config.rag.embedding_model_path or default_model_dir()
    except FileNotFoundError as exc:
        return Check("embeddings", False, str(exc))
    return Check("embeddings", True, str(path))


def _disk(config: AppConfig) -> Check:
    config.paths.data_dir.mkdir(parents=True, exist_ok=True)
    free_gb = shutil.disk_usage(config.paths.data_dir).free / 1e9
    ok = free_gb >= 2
    return Check("disk", ok, f"{free_gb:.1f} GB free" + ("" if ok else ": free at least 2 GB"))


CHECKS: tuple[Callable[[AppConfig], Check], ...] = (
    _database,
    _model,
    _embeddings,
    ocr_check,
    directory_check,
    _disk,
    index_check,
    gpu_check,
    engine_check,
    gateway_check,
    app_check,
)


def run_checks(config: AppConfig, checks: tuple[Callable[[AppConfig], Check], ...] = CHECKS) -> int:
    """Run the checks in order, print one line each; 1 when any failed, else 0."""
    failed = 0
    for check in checks:
        result = check(config)
        failed += not result.ok
        mark = "FAIL" if not result.ok else "warn" if result.warn else "ok"
        print(f"[{mark}] {result.name}: {result.detail}", flush=True)
    if failed:
        print(f"{failed} check(s) failed: fix the [FAIL] lines above, then rerun appliance doctor")
    return 1 if failed else 0
