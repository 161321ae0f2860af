"""Portable copies of the appliance's tables: dump every row to JSON lines, load them back.

Used by ``appliance backup`` for PostgreSQL (one REPEATABLE READ transaction, so the dump is a
consistent snapshot) and by ``appliance restore`` whenever the target is not a plain SQLite file
copy (e.g. a SQLite backup restored into PostgreSQL). Tables are visited in foreign-key order
from the ORM metadata; values are tagged only where JSON has no native type (datetimes).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import IO, Any

from sqlalchemy import DateTime, Engine, Table, func, insert, select, text

from appliance.core.db.models import Base

BATCH = 500


def tables() -> list[Table]:
    """The appliance's tables, parents before children."""
    return list(Base.metadata.sorted_tables)


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"$dt": value.isoformat()}
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"$dt"}:
        return datetime.fromisoformat(value["$dt"])
    return value


def dump_rows(engine: Engine, out: IO[str]) -> dict[str, int]:
    """Write one JSON line per row (``{"t": table, "r": {column: value}}``); return row counts.

    On PostgreSQL the whole dump reads one REPEATABLE READ snapshot.
    """
    counts: dict[str, int] = {}
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():
            for table in tables():
                n = 0
                order = list(table.primary_key.columns)
                for row in conn.execute(select(table).order_by(*order)).mappings():
                    record = {k: _encode(v) for k, v in row.items()}
                    out.write(json.dumps({"t": table.name, "r": record}, ensure_ascii=False))
                    out.write("\n")
                    n += 1
                counts[table.name] = n
    return counts


def read_rows(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Parse the lines ``dump_rows`` wrote."""
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            yield item["t"], {k: _decode(v) for k, v in item["r"].items()}
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"database dump line {lineno} is damaged: {exc}") from exc


def rows_of(engine: Engine) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every row of a database, as ``read_rows`` yields them (for SQLite-to-other copies)."""
    with engine.connect() as conn:
        for table in tables():
            order = list(table.primary_key.columns)
            for row in conn.execute(select(table).order_by(*order)).mappings():
                yield table.name, dict(row)


def row_count(engine: Engine) -> int:
    """Rows in the appliance's tables (0 for a fresh, migrated database)."""
    total = 0
    with engine.connect() as conn:
        for table in tables():
            total += conn.execute(select(func.count()).select_from(table)).scalar_one()
    return total


def load_rows(engine: Engine, rows: Iterator[tuple[str, dict[str, Any]]]) -> dict[str, int]:
    """Insert rows into a migrated, empty database in one transaction; fix PostgreSQL sequences.

    The caller has checked that the target is empty: the load fails (and rolls back) on any
    duplicate key rather than merging.
    """
    by_name = {t.name: t for t in tables()}
    counts: dict[str, int] = {}
    with engine.begin() as conn:
        batch: list[dict[str, Any]] = []
        current: str | None = None

        def flush() -> None:
            if batch and current is not None:
                conn.execute(insert(by_name[current]), batch)
                batch.clear()

        for name, record in rows:
            if name not in by_name:
                raise ValueError(f"the backup has a table this version does not know: {name}")
            if name != current or len(batch) >= BATCH:
                flush()
                current = name
            table = by_name[name]
            for col in table.columns:
                if isinstance(col.type, DateTime) and isinstance(record.get(col.name), str):
                    record[col.name] = datetime.fromisoformat(record[col.name])
            batch.append(record)
            counts[name] = counts.get(name, 0) + 1
        flush()
        if engine.dialect.name == "postgresql":
            for table in tables():
                pk = list(table.primary_key.columns)
                if len(pk) == 1 and pk[0].autoincrement is not False and _is_int(pk[0]):
                    conn.execute(
                        text(
                            f"SELECT setval(pg_get_serial_sequence('{table.name}', "
                            f"'{pk[0].name}'), COALESCE((SELECT MAX({pk[0].name}) FROM "
                            f"{table.name}), 0) + 1, false)"
                        )
                    )
    return counts


def _is_int(column: Any) -> bool:
    try:
        return column.type.python_type is int
    except NotImplementedError:
        return False
