"""The install state (``ETC/install-state.json``): what the installer did last time, so a re-run
changes only what is not already right, and uninstall knows what to remove."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def load_state(path: Path) -> dict[str, Any]:
    """The saved state, or ``{}`` when there is none (a first install)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise SystemExit(f"{path} is damaged ({exc}): move it away and rerun") from exc


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """Write ``text`` to ``path`` via a temporary file and one rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def save_state(path: Path, state: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(state, indent=2, sort_keys=True) + "\n", 0o600)


def ensure_file(path: Path, text: str, mode: int = 0o644) -> bool:
    """Write ``text`` unless the file already holds exactly it; True when it changed."""
    try:
        if path.read_text(encoding="utf-8") == text:
            if (path.stat().st_mode & 0o777) != mode:
                os.chmod(path, mode)
                return True
            return False
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    write_atomic(path, text, mode)
    return True
