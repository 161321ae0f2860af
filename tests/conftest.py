"""Session-scoped real parts: the prepared model, the embedded engine, the embedder, databases.

Each model is loaded once per test session. The default model is converted once into
``.cache/models`` (kept between runs; CI's clean clone converts it once, ~45 s).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.paths import MODELS_CACHE

# the real LDAP and OIDC servers of the sign-in tests (slapd_server, oidc_provider, ...)
pytest_plugins = ["support.directory_fixtures"]

PG_ADMIN_URL = os.environ.get("TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing leaves the box, in tests too
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")


@pytest.fixture(scope="session")
def model_dir() -> Path:
    from engine.embedded.model_store import prepare_default_model

    return prepare_default_model(MODELS_CACHE)


@pytest.fixture(scope="session")
def engine(model_dir: Path):  # noqa: ANN201
    from engine.embedded.engine import EmbeddedEngine

    eng = EmbeddedEngine(model_dir, kv_budget_tokens=16384, max_queue=8)
    yield eng
    eng.close()


@pytest.fixture(scope="session")
def embedder():  # noqa: ANN201
    from rag.embeddings import Embedder

    return Embedder()


def _pg_available() -> str | None:
    """None when the local PostgreSQL answers, else the reason it does not."""
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3):
            return None
    except Exception as exc:
        return f"PostgreSQL at {PG_ADMIN_URL} is not reachable: {exc}"


@pytest.fixture()
def pg_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test, dropped afterwards."""
    reason = _pg_available()
    if reason:
        pytest.skip(reason)
    import psycopg

    name = f"appliance_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    yield f"{base}/{name}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Both database backends: a SQLite file, and a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'appliance.db'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture()
def db(db_url: str):  # noqa: ANN201
    """A migrated database on each backend (``db_url``), disposed after the test."""
    from appliance.core.db.session import Database

    database = Database(db_url)
    database.migrate()
    yield database
    database.dispose()


def make_config(data_dir: Path, model_dir: Path, **sections):  # noqa: ANN003, ANN201
    """A config for tests: small answers, the prepared model, everything under ``data_dir``."""
    from appliance.core.config import load_config

    overrides = {
        "paths": {"data_dir": str(data_dir)},
        "engine": {"model_path": str(model_dir), "max_new_tokens": 24},
        # the CPU profile's default is extractive (no generation); tests exercise the whole
        # turn, the model's text included (the default itself: test_grounding.py)
        "chat": {"answer_mode": "grounded"},
    }
    for key, value in sections.items():
        overrides[key] = {**overrides.get(key, {}), **value}
    return load_config(environ={}, overrides=overrides)


@pytest.fixture(scope="session")
def appliance(tmp_path_factory: pytest.TempPathFactory, model_dir: Path, engine, embedder):  # noqa: ANN001, ANN201
    """One appliance on SQLite with the sample corpus ingested, shared by service/API tests."""
    from appliance.wiring.appliance import build_appliance

    config = make_config(tmp_path_factory.mktemp("appliance"), model_dir)
    app = build_appliance(config, engine=engine, embedder=embedder)
    yield app
    app.db.dispose()


@pytest.fixture()
def appending(appliance):  # noqa: ANN001, ANN201
    """The shared appliance's follow-ups append (``rag.layout`` "append") during the test: the
    default "adaptive" may re-lay a turn by design when the cache shadow predicts that cheaper,
    which depends on what earlier tests left in the shared engine's cache."""
    before = appliance.settings.current().layout
    appliance.settings.update("test", {"layout": "append"})
    yield
    appliance.settings.update("test", {"layout": before})


@pytest.fixture(scope="session")
def config_for():  # noqa: ANN201
    """``make_config`` as a fixture, for test modules (conftest is not importable)."""
    return make_config


# ---- the embedded engine behind its SGLang-compatible HTTP server (one per test module) ------


@pytest.fixture(scope="module")
def base(engine) -> Iterator[str]:  # noqa: ANN001
    from support.servers import MODEL, serving

    from engine.server.app import build_server_app

    with serving(build_server_app(engine, MODEL)) as url:
        yield url


@pytest.fixture(scope="module")
def http(base: str) -> Iterator:
    import httpx

    with httpx.Client(base_url=base, timeout=120) as client:
        yield client


@pytest.fixture(scope="module")
def oai(base: str):  # noqa: ANN201
    import openai

    client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=120)
    yield client
    client.close()
