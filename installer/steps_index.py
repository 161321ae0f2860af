"""The index step: after a change of embedding model, embed the documents again before start."""

from __future__ import annotations

import json
import os
import subprocess

from installer.context import Context, StepResult, run
from installer.layout import UNIT_NAMES
from installer.steps_system import step_service_user

# re-embedding a large corpus on a CPU box takes a while (about 100 chunks/s with MiniLM)
REINDEX_TIMEOUT_S = 4 * 3600


def _reindex(ctx: Context, *flags: str, timeout: int = 600) -> dict:
    cmd = [str(ctx.layout.python), "-m", "installer.reindex", str(ctx.layout.config_file)]
    out = run(
        [*cmd, *flags],
        "embedding the documents again with the new embedding model",
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=timeout,
    )
    return json.loads(out.strip().splitlines()[-1])


def step_index(ctx: Context) -> StepResult:
    """When the index holds another embedder's vectors (the appliance would refuse to open it),
    embed every chunk again with the configured model, in the venv. A running app is stopped
    first, so that it cannot save its old index over the new one; ``step_start`` starts it."""
    if _reindex(ctx, "--check")["reindex_from"] is None:
        return StepResult("index", False, "built with the configured embedding model")
    if ctx.opts.systemd:  # stopping a stopped unit is harmless
        subprocess.run(["systemctl", "stop", UNIT_NAMES["app"]], capture_output=True, check=False)
    done = _reindex(ctx, timeout=REINDEX_TIMEOUT_S)
    if ctx.layout.is_system:
        step_service_user(ctx)  # the new index files were just written as root
    return StepResult(
        "index", True, f"{done['reindexed']} chunks embedded again ({done['from']} -> {done['to']})"
    )
