"""One scored ask of ``appliance bench quality``: the events of a chat turn, collected and
scored as what the user is shown (``appliance.bench.quality_score``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from appliance.bench.quality_score import Outcome, korean, score
from appliance.core.errors import ChatError
from appliance.core.services.chat import (
    ChatEvent,
    DeltaEvent,
    DoneEvent,
    ErrorEvent,
    RetrievalEvent,
)


def ask_once(app: Any, principal: Any, item: dict) -> Outcome:  # noqa: ANN401
    """Ask one question in a fresh conversation and score what the user is shown."""
    return collect(item, lambda: app.chat.ask(principal, item["question"]))


def collect(
    item: dict,
    start: Callable[[], Iterator[ChatEvent]],
    opened: list[int] | None = None,
    earlier: Sequence[str] = (),
    shown: list[str] | None = None,
) -> Outcome:
    """Run one turn (``start`` returns its events: an ask, a regenerate) and score what the
    user is shown as the answer to ``item``, against this turn's sources and the ``earlier``
    ones of its conversation (an answer is checked against every source the conversation has
    shown). The turn's conversation id is appended to ``opened`` once it is stored, and its
    sources' texts to ``shown``."""
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
    first = cites[0].source if cites else ""
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
    )


def failed(item: dict, why: str) -> Outcome:
    """An ask that got no answer, and why."""
    return Outcome(
        korean(item), False, False, False, False, (), 0.0, 0.0, error=why, question=item["question"]
    )
