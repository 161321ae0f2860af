"""``appliance backup`` and ``appliance restore``: their sub-commands and handlers."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path


def cmd_backup(args: argparse.Namespace) -> int:
    from appliance.core.config import load_config
    from appliance.ops.backup import BackupError, create_backup

    config = load_config(args.config)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    out = args.out or config.paths.data_dir / "backups" / f"appliance-{stamp}.tar.gz"
    try:
        result = create_backup(config, Path(out), config_file=args.config)
    except BackupError as exc:
        print(f"backup failed: {exc}", file=sys.stderr)
        return 1
    rows = ", ".join(f"{n} {t}" for t, n in result.rows.items() if n and t in _SHOWN)
    print(f"backup written: {result.path}")
    print(f"  database ({result.database}): {rows or 'no rows'}")
    print(f"  index: {result.index_files} files; config: {'yes' if args.config else 'no'}")
    return 0


_SHOWN = ("users", "conversations", "messages", "documents", "chunks")


def cmd_restore(args: argparse.Namespace) -> int:
    from appliance.core.config import load_config
    from appliance.ops.backup import BackupError, restore_backup

    config = load_config(args.config)
    try:
        manifest = restore_backup(
            config, Path(args.archive), force=args.force, config_out=args.config_out
        )
    except BackupError as exc:
        print(f"restore failed: {exc}", file=sys.stderr)
        return 1
    rows = manifest["rows"]
    print(f"restored {args.archive} (made {manifest['created_at']}, v{manifest['app_version']})")
    print(
        f"  {rows.get('conversations', 0)} conversations, {rows.get('messages', 0)} messages, "
        f"{rows.get('documents', 0)} documents into {config.database_url}"
    )
    print(f"  index into {config.paths.index_dir}")
    if args.config_out:
        print(f"  the backed-up config is at {args.config_out}")
    print("start (or restart) the appliance to serve the restored data")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``backup`` and ``restore`` to the ``appliance`` command."""
    p = sub.add_parser("backup", help="back up the database, the index and the config")
    p.add_argument("--out", type=Path, help="archive path (default: DATA_DIR/backups/...)")
    p.set_defaults(func=cmd_backup)

    p = sub.add_parser("restore", help="restore a backup into an empty data dir and database")
    p.add_argument("archive", type=Path)
    p.add_argument("--force", action="store_true", help="replace existing data")
    p.add_argument(
        "--config-out", type=Path, help="also write the backed-up config file to this path"
    )
    p.set_defaults(func=cmd_restore)
