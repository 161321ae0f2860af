"""The security suite's parts: one small appliance behind the real web app (API, ``/v1``,
sign-in pages, admin console, chat page, ``/metrics``), served by uvicorn on a free loopback
port for the whole suite, with an admin and two staff accounts, and headless Chromium.

Tests that change the site's settings or throttle state build their own (``own_site``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.appliances import AQUARIUM, build_small_appliance
from support.browser import chromium
from support.servers import serving

PASSWORD = "password-789"  # every account's password here


@dataclass
class Site:
    """A served appliance: its base URL and the appliance itself."""

    base: str
    appliance: Any
    app: Any = None  # the web app served

    @property
    def auth(self) -> Any:
        return self.appliance.auth


@contextmanager
def _served(
    data_dir: Path, model_dir, engine, embedder, config_for, sections: dict
) -> Iterator[Site]:  # noqa: ANN001
    from appliance.wiring.appliance import build_appliance
    from appliance.wiring.web import build_web_app

    if sections:
        config = config_for(
            data_dir, model_dir, bootstrap={"ingest_sample_corpus": False}, **sections
        )
        appliance = build_appliance(config, engine=engine, embedder=embedder)
    else:
        appliance = build_small_appliance(data_dir, model_dir, engine, embedder, config_for)
    for name, role in (("root", "admin"), ("alice", "staff"), ("bob", "staff")):
        appliance.auth.create_user(name, PASSWORD, role=role)
    docs = data_dir / "docs"
    docs.mkdir()
    (docs / "aquarium.md").write_text(AQUARIUM, encoding="utf-8")
    appliance.ingest.ingest_folder(docs)
    app = build_web_app(appliance)
    try:
        with serving(app) as base:
            yield Site(base, appliance, app)
    finally:
        app.state.admin_console.sampler.stop()
        appliance.db.dispose()


@pytest.fixture(scope="session")
def site(tmp_path_factory, model_dir, engine, embedder, config_for) -> Iterator[Site]:  # noqa: ANN001
    """The suite's shared site (default settings)."""
    data = tmp_path_factory.mktemp("security")
    with _served(data, model_dir, engine, embedder, config_for, {}) as s:
        yield s


@pytest.fixture()
def own_site(
    tmp_path_factory, model_dir, engine, embedder, config_for
) -> Callable[..., AbstractContextManager[Site]]:  # noqa: ANN001
    """``with own_site(security={...}) as s:`` a site of one's own, with config sections."""

    def make(**sections: dict) -> AbstractContextManager[Site]:
        data = tmp_path_factory.mktemp("security-own")
        return _served(data, model_dir, engine, embedder, config_for, sections)

    return make


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Chromium (Debian's), shared by the suite's browser tests."""
    with chromium() as launched:
        yield launched
