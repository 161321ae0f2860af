"""Where an installation lives: one ``Layout`` computed from ``--prefix``.

The default prefix ``/opt/rag-appliance`` is a system install: config in ``/etc/appliance``, data
in ``/var/lib/appliance``, units in ``/etc/systemd/system``. Any other prefix keeps everything
under it (``PREFIX/etc/appliance``, ``PREFIX/data``, ``PREFIX/systemd``), which is how the tests
and containers install.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SYSTEM_PREFIX = Path("/opt/rag-appliance")
UNIT_NAMES = {
    "engine": "appliance-engine.service",
    "app": "appliance-app.service",
    "gateway": "appliance-gateway.service",
}


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
        return self.units_dir / UNIT_NAMES[role]
