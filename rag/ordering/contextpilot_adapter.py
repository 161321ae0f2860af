"""The ``contextpilot`` strategy: ContextPilot 0.5.0's live index, for A/B tests against ours.

Registered only when the ``contextpilot`` package imports (``available()``). It sees what
ContextPilot's own API sees: the doc ids of each request and a conversation id. ContextPilot
learns evictions only through its SGLang hook, which the appliance does not install, so its
index keeps every context it has ordered.
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
from collections.abc import Hashable, Sequence

from rag.prompt_keys import is_tail_key
from rag.types import RetrievedChunk


def available() -> bool:
    """True when ContextPilot's ordering core (and its numpy/scipy needs) imports."""
    try:
        from contextpilot.server.live_index import ContextPilot  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure means "not installed here"
        return False
    return True


class ContextPilotOrdering:
    def __init__(self) -> None:
        from contextpilot.server.live_index import ContextPilot

        # ContextPilot logs and prints a report on every call; keep the appliance's logs clean
        logging.getLogger("contextpilot").setLevel(logging.WARNING)
        with contextlib.redirect_stdout(io.StringIO()):
            self._index = ContextPilot(use_gpu=False)
        self._lock = threading.Lock()
        self._fresh = 0

    def __call__(
        self, chunks: Sequence[RetrievedChunk], prefix: Sequence[Hashable]
    ) -> list[RetrievedChunk]:
        if len(chunks) <= 1:
            return list(chunks)
        by_id = {c.chunk_id: c for c in chunks}
        with self._lock:
            # a conversation is named by its first user message (absent on a first turn)
            first = next((k for k in prefix if is_tail_key(k)), None)
            if first is not None:
                conversation = first
            else:
                self._fresh += 1
                conversation = f"new-{self._fresh}"
            with contextlib.redirect_stdout(io.StringIO()):
                reordered, _ = self._index.reorder(
                    [c.chunk_id for c in chunks], conversation_id=conversation
                )
        out: list[RetrievedChunk] = []
        for doc in reordered[0]:
            chunk = by_id.pop(int(doc), None)
            if chunk is not None:
                out.append(chunk)
        out.extend(c for c in chunks if c.chunk_id in by_id)  # anything it dropped, in order
        return out
