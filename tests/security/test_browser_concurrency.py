"""Issue #22: the browser chat served one user at a time. Its generating handlers ran at
Gradio's default concurrency limit of 1, so people asking at once were answered strictly one
after another, while the REST API batches up to ``engine.max_running_requests``.

Three staff users, each in a browser context of their own signed in through ``/login``, ask at
once; each answer's start (its first text in the chat) and end (the question box cleared, the
answer stored) are recorded on the page clock."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support.appliances import AQUARIUM
from support.servers import serving

from appliance.bench.load_browser import BrowserTurn, ask, at_once, open_chat, poll

pytestmark = pytest.mark.browser

PASSWORD = "password-789"
TURN_S = 300  # three answers on a busy 2-core machine, at most
QUESTIONS = (
    "How often is the office aquarium glass cleaned?",
    "Who feeds the office aquarium fish?",
    "When are the aquarium water changes done?",
)


def _staff(site, n: int) -> list[str]:  # noqa: ANN001
    names = [f"conc-{secrets.token_hex(3)}-{i}" for i in range(n)]
    for name in names:
        site.auth.create_user(name, PASSWORD, role="staff")
    return names


def _ask_together(browser, base: str, users: list[str]) -> list[BrowserTurn]:  # noqa: ANN001
    """Sign every user in, then send one question from each page, as close together as the
    pages allow; wait until every turn has ended."""
    pages = [open_chat(browser, base, user, PASSWORD) for user in users]
    try:
        turns = [BrowserTurn(i, QUESTIONS[i % len(QUESTIONS)]) for i in range(len(users))]
        for page, turn in zip(pages, turns, strict=True):
            ask(page, turn)
        pending = set(range(len(turns)))
        while pending:
            time.sleep(0.25)
            pending = {i for i in pending if not poll(pages[i], turns[i], TURN_S)}
        return turns
    finally:
        for page in pages:
            page.context.close()


def test_three_people_asking_at_once_are_answered_at_once(site, browser) -> None:  # noqa: ANN001
    """Each of the three is answered, and the answers run at the same time: every answer has
    begun before any of them has finished (at concurrency 1 each waited for the last).

    The answers are made to last at least 48 tokens (about two seconds each here): the suite's
    24-token answers stream for about a second, no more than ``at_once``'s grace, so three
    overlapping answers could read as two (seen once in CI)."""
    settings = site.appliance.settings
    keys = ("max_new_tokens", "min_new_tokens", "stop_repeats")
    before = {k: getattr(settings.current(), k) for k in keys}
    settings.update("test", {"max_new_tokens": 96, "min_new_tokens": 48, "stop_repeats": False})
    try:
        turns = _ask_together(browser, site.base, _staff(site, 3))
    finally:
        settings.update("test", before)
    assert [t.outcome for t in turns] == ["answered"] * 3, [(t.outcome, t.detail) for t in turns]
    spans = [(round(t.first - t.sent, 1), round(t.ended - t.sent, 1)) for t in turns]
    assert at_once(turns) == 3, f"answers ran one after another: {spans}"


@contextmanager
def _one_at_a_time(tmp_path: Path, model_dir, engine, embedder, config_for) -> Iterator[Any]:  # noqa: ANN001
    """A site whose config lets one answer run at a time (``engine.max_running_requests = 1``;
    ``own_site`` cannot take an ``engine`` section: its own parameter has that name)."""
    from appliance.wiring.appliance import build_appliance
    from appliance.wiring.web import build_web_app

    config = config_for(
        tmp_path,
        model_dir,
        bootstrap={"ingest_sample_corpus": False},
        engine={"max_running_requests": 1},
    )
    appliance = build_appliance(config, engine=engine, embedder=embedder)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "aquarium.md").write_text(AQUARIUM, encoding="utf-8")
    appliance.ingest.ingest_folder(tmp_path / "docs")
    app = build_web_app(appliance)
    try:
        with serving(app) as base:
            yield SimpleNamespace(base=base, auth=appliance.auth, settings=appliance.settings)
    finally:
        app.state.admin_console.sampler.stop()
        appliance.db.dispose()


def test_a_waiting_question_says_where_it_is(  # noqa: ANN201
    tmp_path: Path,
    model_dir,
    engine,
    embedder,
    config_for,
    browser,  # noqa: ANN001
):
    """With room for one answer at a time, the two questions that wait say so in words in the
    chat ("1 question ahead of yours", "Your question is next"), and are then answered in
    turn (before, they sat in Gradio's queue behind a bare "queue: 2/3").

    The answers last at least 48 tokens, as in the test above: with the suite's short answers
    the first could end before the third page had sent its question, which then never waited
    (seen once in CI)."""
    with _one_at_a_time(tmp_path, model_dir, engine, embedder, config_for) as s:
        changes = {"max_new_tokens": 96, "min_new_tokens": 48, "stop_repeats": False}
        s.settings.update("test", changes)
        turns = _ask_together(browser, s.base, _staff(s, 3))
    assert [t.outcome for t in turns] == ["answered"] * 3, [(t.outcome, t.detail) for t in turns]
    notes = [t.waiting for t in turns if t.waiting]
    assert len(notes) >= 2, [t.waiting for t in turns]
    assert all("ahead of yours" in n or "is next" in n for n in notes), notes
