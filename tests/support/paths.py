"""Where things are, for tests in any folder."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "support" / "fixtures"
MODELS_CACHE = REPO / ".cache" / "models"
