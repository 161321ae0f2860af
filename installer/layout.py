"""Where an installation lives: one ``Layout`` computed from ``--prefix``.

The default prefix ``/opt/rag-appliance`` is a system install: config in ``/etc/appliance``, data
in ``/var/lib/appliance``, units in ``/etc/systemd/system``. Any other prefix keeps everything
under it (``PREFIX/etc/appliance``, ``PREFIX/data``, ``PREFIX/systemd``), which is how the tests
and containers install.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SYSTEM_PREFIX = Path("/opt/rag-appliance")
UNIT_NAMES = {
    "engine": "appliance-engine.service",
    "app": "appliance-app.service",
    "gateway": "appliance-gateway.service",
}
# a box split into GPU groups runs one SGLang worker each: roles engine (the first), engine-1...
_EXTRA_WORKER = re.compile(r"engine-([1-9][0-9]{0,2})")


def worker_role(index: int) -> str:
    """The unit role of SGLang worker ``index`` (0: ``engine``, as on a one-worker box)."""
    return "engine" if index == 0 else f"engine-{index}"


def unit_name(role: str) -> str:
    """The systemd unit file name of a role (``KeyError`` for an unknown one)."""
    if role in UNIT_NAMES:
        return UNIT_NAMES[role]
    if _EXTRA_WORKER.fullmatch(role):
        return f"appliance-{role}.service"
    raise KeyError(role)


def start_order(roles: list[str] | set[str] | tuple[str, ...]) -> list[str]:
    """Roles in start order: the engine workers, the gateway, then the app."""
    workers = sorted((r for r in roles if r.startswith("engine")), key=lambda r: (len(r), r))
    return [*workers, *(r for r in ("gateway", "app") if r in roles)]


@dataclass(frozen=True)
class Layout:
    prefix: Path
    etc_dir: Path
    data_dir: Path
    units_dir: Path

    @classmethod
    def for_prefix(cls, prefix: Path) -> Layout:
        prefix = prefix.resolve()
        if prefix == SYSTEM_PREFIX:
            return cls(
                prefix,
                Path("/etc/appliance"),
                Path("/var/lib/appliance"),
                Path("/etc/systemd/system"),
            )
        return cls(prefix, prefix / "etc" / "appliance", prefix / "data", prefix / "systemd")

    @property
    def is_system(self) -> bool:
        return self.prefix == SYSTEM_PREFIX

    @property
    def venv(self) -> Path:
        return self.prefix / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def appliance_bin(self) -> Path:
        return self.venv / "bin" / "appliance"

    @property
    def wrapper(self) -> Path:
        """``PREFIX/bin/appliance``: the CLI with this install's config."""
        return self.prefix / "bin" / "appliance"

    @property
    def config_file(self) -> Path:
        return self.etc_dir / "appliance.toml"

    @property
    def state_file(self) -> Path:
        return self.etc_dir / "install-state.json"

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"

    @property
    def backups_dir(self) -> Path:
        return self.data_dir / "backups"

    def unit_path(self, role: str) -> Path:
        return self.units_dir / unit_name(role)
