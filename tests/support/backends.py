"""The engine backends the conformance suites run against (fixtures in tests/engine/conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.base import Engine


@dataclass
class Backend:
    name: str  # "embedded", "client" (SGLangEngine against engine-server) or "sglang" (real)
    engine: Engine
    real_sglang: bool = False
