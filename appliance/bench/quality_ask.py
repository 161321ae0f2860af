"""One scored ask of ``appliance bench quality``: the events of a chat turn, collected and
scored as what the user is shown (``appliance.bench.quality_score``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sqlalchemy import select

from appliance.bench.quality_score import Outcome, korean, score
from appliance.core.db.models import Document
from appliance.core.errors import ChatError
from appliance.core.services.chat import (
    ChatEvent,
    DeltaEvent,
    DoneEvent,
    ErrorEvent,
    RetrievalEvent,
)


def ask_once(app: Any, principal: Any, item: dict) -> Outcome:  # noqa: ANN401
    """Ask one question in a fresh conversation and score what the user is shown (a citation
    is the gold file when its document's stored name is: ``a/index.html``, not only
    ``index.html``)."""
    return collect(
        item,
        lambda: app.chat.ask(principal, item["question"]),
        paths=lambda ids: stored_names(app.db, ids),
    )


def stored_names(db: Any, document_ids: Sequence[int]) -> dict[int, str]:  # noqa: ANN401
    """The stored name (path below an ingested folder) of each document id."""
    with db.session() as s:
        found = s.execute(
            select(Document.id, Document.source_path).where(Document.id.in_(set(document_ids)))
        )
        return {doc_id: path for doc_id, path in found}


def collect(
    item: dict,
    start: Callable[[], Iterator[ChatEvent]],
    opened: list[int] | None = None,
    earlier: Sequence[str] = (),
    shown: list[str] | None = None,
    paths: Callable[[Sequence[int]], dict[int, str]] | None = None,
) -> Outcome:
    """Run one turn (``start`` returns its events: an ask, a regenerate) and score what the
    user is shown as the answer to ``item``, against this turn's sources and the ``earlier``
    ones of its conversation (an answer is checked against every source the conversation has
    shown). The turn's conversation id is appended to ``opened`` once it is stored, and its
    sources' texts to ``shown``. ``paths`` gives the stored names of cited documents (a
    citation shows only the base name); without it the citation's own name is compared."""
    began = time.perf_counter()
    first_delta = 0.0
    retrieval: RetrievalEvent | None = None
    done: DoneEvent | None = None
    try:
        for event in start():
            if isinstance(event, RetrievalEvent):
                retrieval = event
            elif isinstance(event, DeltaEvent) and not first_delta:
                first_delta = time.perf_counter() - began
            elif isinstance(event, DoneEvent):
                done = event
            elif isinstance(event, ErrorEvent):
                return failed(item, f"{event.kind}: {event.message}")
    except ChatError as exc:
        return failed(item, f"{exc.kind}: {exc}")
    latency = time.perf_counter() - began
    if done is None or retrieval is None:
        return failed(item, "the stream ended without an answer")
    if opened is not None:
        opened.append(done.conversation_id)
    cites = retrieval.citations
    card = "\n".join(s.text for s in retrieval.evidence)
    sources = [c.text for c in cites]
    if shown is not None:
        shown += sources
    names = paths([c.document_id for c in cites]) if paths and cites else {}
    cited = [names.get(c.document_id, c.source) for c in cites]
    first = cited[0] if cited else ""
    return score(
        item,
        card,
        done.answer,
        first,
        done.check,
        [*earlier, *sources],
        (latency, first_delta or latency),
        korean(item),
        done.repeated,
        chunks=[c.text for c in cites],
        cited=cited,
        generated=done.stats.completion_tokens > 0,
    )


def failed(item: dict, why: str) -> Outcome:
    """An ask that got no answer, and why."""
    return Outcome(
        korean(item), False, False, False, False, (), 0.0, 0.0, error=why, question=item["question"]
    )
