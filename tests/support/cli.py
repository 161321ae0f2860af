"""Running ``appliance`` commands as a user would, in a child process with a clean environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.paths import REPO


def run_appliance(
    args: list[str], model_dir: Path, data_dir: Path, timeout: float, **settings: str
) -> str:
    """``python -m appliance.cli ARGS`` on ``model_dir`` with ``data_dir`` as its data dir and
    no other ``APPLIANCE_*`` variable but ``settings`` (``ENGINE__NATIVE_ATTENTION="false"``:
    no kernel build in a fresh data dir); its standard output (it must exit 0)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    env["APPLIANCE_ENGINE__MODEL_PATH"] = str(model_dir)
    env["APPLIANCE_PATHS__DATA_DIR"] = str(data_dir)
    env |= {f"APPLIANCE_{key}": value for key, value in settings.items()}
    return subprocess.run(
        [sys.executable, "-m", "appliance.cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    ).stdout
