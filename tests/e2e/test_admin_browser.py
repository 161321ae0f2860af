"""The admin console in headless Chromium against the real web app (served in-process):
staff are refused in the page and by every handler's HTTP endpoint; an admin uploads a
document that chat then retrieves, changes settings that the next turn uses and the audit
log shows, and watches the live charts fill with data."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest
from sqlalchemy import select
from support.appliances import AQUARIUM, build_small_appliance
from support.browser import chromium, need_chromium
from support.servers import serving

from appliance.core.db.models import Message
from appliance.wiring.web import build_web_app

SCREENSHOTS = os.environ.get("TEST_SCREENSHOT_DIR")  # set to refresh docs/admin.png
DENIED = "Only administrators can do this."

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(tmp_path_factory, model_dir, engine, embedder, config_for) -> Iterator:  # noqa: ANN001
    need_chromium()
    appliance = build_small_appliance(
        tmp_path_factory.mktemp("admin-browser"), model_dir, engine, embedder, config_for
    )
    appliance.auth.create_user("clerk", "password-123")
    app = build_web_app(appliance)
    with serving(app) as base:
        yield appliance, base
    app.state.admin_console.sampler.stop()
    appliance.db.dispose()


@pytest.fixture(scope="module")
def browser(site) -> Iterator:  # noqa: ANN001
    with chromium() as launched:
        yield launched


def sign_in(browser, base: str, username: str, password: str):  # noqa: ANN001, ANN201
    """A fresh context signed in at /admin; ``context.external`` collects any request that
    leaves the box (the appliance is air-gapped: there must be none)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.external = []

    def record(request) -> None:  # noqa: ANN001
        if urlparse(request.url).hostname not in (None, "127.0.0.1", "localhost"):
            context.external.append(request.url)

    context.on("request", record)
    page = context.new_page()
    page.goto(base + "/admin/")
    page.locator("#username").fill(username)
    page.locator("#password").fill(password)
    page.locator("#login").click()
    page.wait_for_url("**/admin/**")
    return page


def test_staff_cannot_reach_any_admin_function(site, browser) -> None:  # noqa: ANN001
    from playwright.sync_api import expect

    appliance, base = site
    page = sign_in(browser, base, "clerk", "password-123")
    expect(page.get_by_text(DENIED).first).to_be_visible(timeout=30_000)
    expect(page.locator("#admin-who")).to_contain_text("for administrators")
    expect(page.locator("#admin-tabs")).to_be_hidden()
    expect(page.locator("#documents")).to_be_hidden()
    page.context.close()

    # the same session calling every handler of the console directly, over Gradio's API
    with httpx.Client(base_url=base, timeout=60) as http:
        form = {"username": "clerk", "password": "password-123", "next": "/admin/"}
        assert http.post("/login", data=form).status_code == 303
        endpoints = http.get("/admin/gradio_api/info").json()["named_endpoints"]
        assert len(endpoints) >= 25
        documents = appliance.ingest.document_count()
        for name, spec in endpoints.items():
            # plausible inputs (Gradio's own examples; no file), so each call reaches the
            # handler itself: e.g. "delete document 3", "save settings", "create user"
            args = [
                None if p["component"] == "File" else p.get("example_input")
                for p in spec["parameters"]
            ]
            body = {"data": args}
            event = http.post(f"/admin/gradio_api/call{name}", json=body).json()["event_id"]
            answer = http.get(f"/admin/gradio_api/call{name}/{event}").text
            assert "event: error" in answer and DENIED in answer, (name, answer[:200])
        assert appliance.ingest.document_count() == documents


def test_admin_uploads_tunes_audits_and_watches_the_charts(site, browser, tmp_path) -> None:  # noqa: ANN001
    from playwright.sync_api import expect

    appliance, base = site
    shots = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path
    (tmp_path / "aquarium.md").write_text(AQUARIUM, encoding="utf-8")
    (tmp_path / "empty.txt").write_bytes(b"")
    page = sign_in(browser, base, "admin", appliance.first_admin_password)
    expect(page.locator("#admin-who")).to_contain_text("Signed in as admin", timeout=30_000)

    # documents: two files at once, each with its own outcome
    page.locator("#upload-files input[type=file]").set_input_files(
        [str(tmp_path / "aquarium.md"), str(tmp_path / "empty.txt")]
    )
    page.locator("#upload").click()
    progress = page.locator("#upload-progress")
    expect(progress).to_contain_text("indexed", timeout=60_000)
    expect(progress).to_contain_text("the file is empty")
    expect(page.locator("#documents")).to_contain_text("aquarium.md", timeout=30_000)

    # settings: one chunk per answer, short answers
    page.get_by_role("tab", name="Settings").click()
    page.locator("#setting-topk input[type=number]").fill("1")
    page.locator("#setting-max-tokens input").fill("6")
    page.locator("#setting-layout input").click()  # follow-ups re-laid, for this A/B
    page.get_by_role("option", name="relay").click()
    page.locator("#save-settings").click()
    expect(page.locator("#settings-note")).to_contain_text("Saved", timeout=30_000)
    page.get_by_role("tab", name="Audit").click()
    page.locator("#audit-show").click()
    expect(page.locator("#audit-events")).to_contain_text("settings.update", timeout=30_000)
    expect(page.locator("#audit-events")).to_contain_text("document.add")

    # chat (same session): the uploaded document is retrieved, under the new settings
    chat = page.context.new_page()
    chat.goto(base + "/")
    for question in ("When is the aquarium glass cleaned?", "How are the fish fed?"):
        chat.locator("#question textarea").fill(question)
        chat.locator("#send").click()
        expect(chat.locator("#sources")).to_contain_text("aquarium.md", timeout=120_000)
        expect(chat.locator("#question textarea")).to_have_value("", timeout=120_000)
    with appliance.db.session() as s:
        answers = s.scalars(select(Message).where(Message.role == "assistant")).all()
        assert len(answers) == 2
        # top-k 1: one retrieved chunk each (cache riders, if any, are flagged apart)
        retrieved = [[c for c in m.citations if not c.get("rider")] for m in answers]
        assert all(len(r) == 1 for r in retrieved)
        assert all(m.completion_tokens <= 6 for m in answers)
        # the first turn has nothing to re-lay; the follow-up was re-laid, as set
        assert [m.layout for m in answers] == ["append", "relay"]
    chat.close()

    # engine and cache: the live charts have data; the cache can be flushed
    page.get_by_role("tab", name="Engine").click()
    expect(page.locator("#engine-status")).to_contain_text("embedded")
    expect(page.locator("#engine-status")).to_contain_text("cache page 1 token(s)")
    expect(page.locator("#engine-summary")).to_contain_text("TTFT p50", timeout=30_000)
    # one drawn line per series (Vega renders SVG): engine samples and the two turns
    for chart, lines in (("hit", 2), ("ttft", 2), ("throughput", 1), ("queue", 2), ("kv", 1)):
        paths = page.locator(f"#chart-{chart} g.mark-line path")
        expect(paths).to_have_count(lines, timeout=30_000)
        expect(paths.first).to_have_attribute("d", re.compile(r"^M[\d.]+,[\d.]+L"))
    page.screenshot(path=str(shots / "admin.png"), full_page=True)
    page.locator("#flush").click()
    expect(page.locator("#flush-note")).to_contain_text("flushed", timeout=30_000)

    # capacity planner (the SGLang tuning module) and a new account, shown once
    page.get_by_role("tab", name="Planner").click()
    page.locator("#plan").click()
    expect(page.locator("#plan-result")).to_contain_text("concurrent sessions", timeout=30_000)
    expect(page.locator("#plan-command")).to_contain_text("--mem-fraction-static")
    page.get_by_role("tab", name="Users").click()
    page.get_by_text("New account").click()
    page.locator("#new-username").locator("input, textarea").fill("newbie")
    page.locator("#create-user").click()
    expect(page.locator("#users-note")).to_contain_text("shown once", timeout=30_000)
    expect(page.locator("#users")).to_contain_text("newbie")
    assert page.context.external == []
    page.context.close()
