"""A chat turn answered as one JSON object, stopped when its client goes.

A non-streamed turn used to run to the token limit, and be stored, after its client had
disconnected: the sync endpoint collected every event before answering and nothing listened
to the connection. ``TurnJSONResponse`` reads the events in a worker thread while it listens
for the client's disconnect. Once the client has gone, the reader stops at the next event and
closes the events, which cancels the engine request and stores nothing (as when a streamed
turn's reader leaves: ``ChatService._relay``), and nothing is sent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import anyio
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from appliance.core.services.chat import ChatEvent

# the answer of a finished turn: (JSON body, status), from its events
Answer = Callable[[Iterator[ChatEvent]], tuple[dict, int]]


class TurnJSONResponse(Response):
    """``answer(events)`` as JSON, unless the client disconnects first."""

    def __init__(self, events: Iterator[ChatEvent], answer: Answer) -> None:
        super().__init__(media_type="application/json")
        self._events = events
        self._answer = answer

    def _collect(self, gone: threading.Event) -> tuple[dict, int] | None:
        """Runs in a worker thread: the answer, or None once the client has gone."""

        def until_gone() -> Iterator[ChatEvent]:
            for event in self._events:
                if gone.is_set():
                    return
                yield event

        try:
            result = self._answer(until_gone())
        finally:
            self._events.close()  # cancels the engine request if the turn did not finish
        return None if gone.is_set() else result

    def _outcome(self, gone: threading.Event) -> tuple[dict, int] | Exception | None:
        try:
            return self._collect(gone)
        except Exception as exc:  # raised again outside the task group, unwrapped
            return exc

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = threading.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(watch)
            outcome = await anyio.to_thread.run_sync(self._outcome, gone)
            tasks.cancel_scope.cancel()
        if isinstance(outcome, Exception):
            raise outcome
        if outcome is None:
            return  # the client has gone: there is no one to answer
        body, status = outcome
        await JSONResponse(body, status)(scope, receive, send)
