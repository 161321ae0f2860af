"""Server-Sent Events: ``data: {json}`` lines, the ``data: [DONE]`` end, and a streaming
response that always closes its line generator, however the response ends.

Starlette reads a sync generator in worker threads and, when the client disconnects, just
stops reading it; closing it is left to garbage collection. ``ClosingStreamingResponse``
closes it as soon as the response is over (which cancels the engine request through the
generator's ``finally``), and on disconnect calls ``on_disconnect`` at once, so a request that
is still in a long prefill step is cancelled without waiting for its next item.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Generator

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

log = logging.getLogger(__name__)

DONE = "data: [DONE]\n\n"


def sse(payload: object) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"


class ClosingStreamingResponse(StreamingResponse):
    def __init__(
        self,
        lines: Generator[str, None, None],
        on_disconnect: Callable[[], object] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(lines, media_type="text/event-stream", headers=headers)
        self._lines = lines
        self._on_disconnect = on_disconnect

    async def listen_for_disconnect(self, receive: Receive) -> None:
        await super().listen_for_disconnect(receive)
        if self._on_disconnect is not None:
            self._on_disconnect()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            try:
                self._lines.close()
            except ValueError:  # still running in a worker thread: it will see the abort
                log.debug("stream generator busy at close; relying on on_disconnect")
                if self._on_disconnect is not None:
                    self._on_disconnect()
