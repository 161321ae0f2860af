"""Revoking a collection reaches the conversations started before it (finding: a follow-up or a
regenerate in an older conversation still answered from the restricted text, which the stored
prompt parts of its earlier turns replayed).

A staff user who may read the ``finance`` collection asks a question its document answers; an
admin revokes ``finance``; the next follow-up, regenerate and continue in that conversation
send the engine nothing of that document (asserted on the prompts the engine received and the
prompt parts stored), cite none of it, and the stored history shows none of its text. The
embedded engine and the real small model, on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from support.appliances import AQUARIUM

from appliance.core.db.models import Chunk, Document, Message
from appliance.core.errors import ChatError
from appliance.core.services.chat import ChatService, DoneEvent, RetrievalEvent
from appliance.core.services.conversations import ConversationService
from engine.base import GenerateRequest
from rag.ordering.base import ContextOrdering
from rag.ordering.prefix import PrefixOrdering

SECRET = (
    "# Bonus approval\n\n## Approval code\n\n"
    "The quarterly bonus approval code is ZEBRA-7731, kept by the finance controller.\n"
)
MARKS = ("ZEBRA-7731", "bonus approval code")  # the restricted text
ASKED = "What is the quarterly bonus approval code?"
FOLLOW_UP = "How often is the office aquarium glass cleaned?"
PASSWORD = "password-123"


class Recording:
    """The engine, recording every prompt it is sent as the model reads it."""

    def __init__(self, inner: Any) -> None:  # noqa: ANN401
        self.inner = inner
        self.prompts: list[str] = []

    def generate(self, request: GenerateRequest) -> Iterator:
        rendered = request.prompt or self.inner.render_chat(request.messages)
        self.prompts.append(rendered)
        return self.inner.generate(request)

    def __getattr__(self, name: str) -> Any:  # noqa: ANN401
        return getattr(self.inner, name)


class Pinned:
    """The appliance's settings with some pinned (short answers, cut at the limit; the follow-up
    appended to what the conversation sent, which is where the earlier documents were)."""

    def __init__(self, inner: Any) -> None:  # noqa: ANN401
        self.inner = inner

    def current(self) -> Any:  # noqa: ANN401
        return replace(
            self.inner.current(),
            layout="append",
            ordering="prefix",
            riders=0,
            max_new_tokens=6,
            min_new_tokens=0,
            answer_mode="grounded",
        )


@pytest.fixture()
def site(db_url: str, tmp_path: Path, model_dir, engine, embedder, config_for) -> Iterator[Any]:  # noqa: ANN001
    """An appliance of its own (``aquarium.md`` in ``default``, ``bonus.md`` in ``finance``), a
    chat service over the recording engine, and ``carol``, who may read both."""
    from appliance.wiring.appliance import build_appliance

    config = config_for(
        tmp_path, model_dir, bootstrap={"ingest_sample_corpus": False}, database={"url": db_url}
    )
    app = build_appliance(config, engine=engine, embedder=embedder)
    for name, text, collection in (
        ("aquarium.md", AQUARIUM, "default"),
        ("bonus.md", SECRET, "finance"),
    ):
        folder = tmp_path / collection
        folder.mkdir()
        (folder / name).write_text(text, encoding="utf-8")
        app.ingest.ingest_folder(folder, collection=collection)
    app.auth.create_user("carol", PASSWORD, collections=["default", "finance"])
    shadow = PrefixOrdering(app.config.engine.kv_budget_tokens)
    recording = Recording(app.engine)
    chat = ChatService(
        app.db,
        app.knowledge,
        recording,  # type: ignore[arg-type]
        app.config.chat,
        Pinned(app.settings),  # type: ignore[arg-type]
        ContextOrdering({"prefix": shadow}, observers=[shadow]),
    )
    try:
        yield app, chat, recording
    finally:
        app.db.dispose()


def _secret_chunks(app: Any) -> set[int]:  # noqa: ANN401
    with app.db.session() as s:
        return set(
            s.scalars(select(Chunk.id).join(Document).where(Document.collection == "finance"))
        )


def _asked_then_revoked(site: Any) -> tuple[int, Any]:  # noqa: ANN401
    """Carol's conversation: the restricted question answered from ``finance`` (the document
    was in the prompt), then ``finance`` revoked by an admin. Returns (conversation, carol)."""
    app, chat, recording = site
    carol = app.auth.principal_for("carol")
    events = list(chat.ask(carol, ASKED))
    assert isinstance(events[-1], DoneEvent), events[-1]
    assert all(mark in recording.prompts[-1] for mark in MARKS)  # it was sent, once
    app.auth.set_collections("carol", ["default"])  # what the admin console's revoke does
    return events[-1].conversation_id, app.auth.principal_for("carol")


def _clean(site: Any, conv: int, events: list) -> None:  # noqa: ANN401
    """The last prompt the engine received, the stored prompt parts and what the turn and the
    stored history cite hold nothing of the restricted document."""
    app, chat, recording = site
    assert isinstance(events[-1], DoneEvent), events[-1]
    for mark in MARKS:
        assert mark not in recording.prompts[-1]
    secret = _secret_chunks(app)
    cited = [c for e in events if isinstance(e, RetrievalEvent) for c in e.citations]
    assert cited and not {c.chunk_id for c in cited} & secret
    with app.db.session() as s:
        rows = list(s.scalars(select(Message).where(Message.conversation_id == conv)))
    last_question = [m for m in rows if m.role == "user"][-1]
    assert not any(mark in str(last_question.prompt_parts) for mark in MARKS)
    assert not any(mark in (last_question.prompt_text or "") for mark in MARKS)
    carol, history = app.auth.principal_for("carol"), ConversationService(app.db, chat)
    shown = [*history.turns(carol, conv), *history.messages(carol, conv)]  # chat page, REST
    assert any(c.get("withheld") for item in shown for c in item.citations)
    for item in shown:
        for c in item.citations:
            assert c["chunk_id"] not in secret or (c["text"] == "" and c["withheld"])
        assert not {s["chunk_id"] for s in item.evidence} & secret


def test_a_follow_up_after_the_revocation_sends_nothing_of_the_revoked_document(site) -> None:  # noqa: ANN001
    conv, carol = _asked_then_revoked(site)
    _app, chat, _recording = site
    _clean(site, conv, list(chat.ask(carol, FOLLOW_UP, conv)))


def test_a_regenerate_after_the_revocation_sends_nothing_of_the_revoked_document(site) -> None:  # noqa: ANN001
    conv, carol = _asked_then_revoked(site)
    _app, chat, _recording = site
    list(chat.ask(carol, FOLLOW_UP, conv))
    _clean(site, conv, list(chat.regenerate(carol, conv)))


def test_a_continue_after_the_revocation_sends_nothing_of_the_revoked_document(site) -> None:  # noqa: ANN001
    """The follow-up's answer, cut at the limit, is continued without the revoked turn; the
    revoked turn's own answer is not continued at all (its documents would be sent again)."""
    conv, carol = _asked_then_revoked(site)
    app, chat, recording = site
    cut = list(chat.ask(carol, FOLLOW_UP, conv))[-1]
    assert isinstance(cut, DoneEvent) and cut.stats.finish_reason == "length"
    _clean(site, conv, list(chat.continue_answer(carol, conv)))

    app.auth.set_collections("carol", ["default", "finance"])
    again = list(chat.ask(app.auth.principal_for("carol"), ASKED))[-1]
    assert isinstance(again, DoneEvent) and again.stats.finish_reason == "length"
    app.auth.set_collections("carol", ["default"])
    sent = len(recording.prompts)
    with pytest.raises(ChatError, match="no longer open to you") as refused:
        chat.continue_answer(app.auth.principal_for("carol"), again.conversation_id)
    assert refused.value.kind == "invalid" and len(recording.prompts) == sent
