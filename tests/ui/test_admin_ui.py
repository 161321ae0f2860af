"""The admin console's Gradio handlers, called directly: every one refuses a staff user (and
a signed-out one) before doing anything; for an admin they return real data."""

from __future__ import annotations

import inspect

import gradio as gr
import pandas as pd
import pytest
from support.appliances import AQUARIUM, build_small_appliance

from appliance.core.services.admin import Upload
from appliance.wiring.appliance import build_console
from ui.admin.page import build_admin_page


@pytest.fixture(scope="module")
def setup(tmp_path_factory, model_dir, engine, embedder, config_for):  # noqa: ANN001, ANN201
    appliance = build_small_appliance(
        tmp_path_factory.mktemp("admin-ui"), model_dir, engine, embedder, config_for
    )
    appliance.auth.create_user("clerk", "password-123")
    console = build_console(appliance)
    console.documents.upload([Upload("aquarium.md", AQUARIUM.encode())], "default", "admin")
    yield appliance, console, build_admin_page(console, appliance.auth)
    appliance.db.dispose()


def handlers(page: gr.Blocks) -> list:
    fns = [block_fn.fn for block_fn in page.fns.values() if block_fn.fn is not None]
    assert len(fns) >= 25  # every button, loader, timer tick and the page-load gate
    return fns


def call(fn, username: str | None):  # noqa: ANN001, ANN201
    """Call a handler as Gradio would: inputs None, the request injected by its type."""
    hints = gr.utils.get_type_hints(fn)
    kwargs = {}
    for name in inspect.signature(fn).parameters:
        kwargs[name] = gr.Request(username=username) if hints.get(name) is gr.Request else None
    result = fn(**kwargs)
    if inspect.isgenerator(result):
        return list(result)
    return result


@pytest.mark.parametrize("username", ["clerk", None, "nobody-such"])
def test_every_admin_handler_refuses_non_admins(setup, username) -> None:  # noqa: ANN001
    appliance, _console, page = setup
    documents = appliance.ingest.document_count()
    for fn in handlers(page):
        with pytest.raises(gr.Error) as refused:
            call(fn, username)
        assert refused.value.message in (
            "Only administrators can do this.",
            "Your session has ended. Please log in again.",
        ), fn.__qualname__
    assert appliance.ingest.document_count() == documents


def test_a_disabled_admin_is_refused_at_once(setup) -> None:  # noqa: ANN001
    appliance, console, page = setup
    appliance.auth.create_user("ex-admin", "password-123", role="admin")
    console.users.set_disabled("admin", "ex-admin", True)
    for fn in handlers(page):
        with pytest.raises(gr.Error):
            call(fn, "ex-admin")


def test_admin_loaders_return_real_data(setup) -> None:  # noqa: ANN001
    _appliance, _console, page = setup
    by_name = {}
    for fn in handlers(page):
        by_name.setdefault(fn.__qualname__.split(".<locals>.")[-1], []).append(fn)
    [gate] = by_name["gate"]
    assert "admin" in call(gate, "admin")[0].value
    documents = call(by_name["load"][0], "admin")
    assert isinstance(documents[0], pd.DataFrame)
    assert list(documents[0]["name"]) == ["aquarium.md"]
    found = [call(fn, "admin") for fn in by_name["load_all"]]
    assert any(isinstance(out, tuple) and "embedded" in str(out[0]) for out in found)


def test_the_engine_tab_shows_the_speculation_record() -> None:
    from appliance.core.services.admin.engine_status import speculation
    from ui.admin.engine import status_markdown

    assert speculation({"spec_accept_length": 0.0, "spec_accept_rate": 0.0}) == {}
    status = {"backend": "embedded", "healthy": True, "launch": {"speculative_pool_tokens": 0}}
    status |= speculation({"spec_accept_length": 1.634, "spec_accept_rate": 0.4215})
    text = status_markdown(status)
    assert "speculative decoding: 42.1% of drafts accepted · 1.63 tokens a verify step" in text
    assert "| `speculative_pool_tokens` | 0 |" in text
    assert "speculative decoding" not in status_markdown({"backend": "sglang", "launch": {}})
