"""How many chat turns the engine takes at once, and the line the chat page's turns wait in.

``TurnCapacity.of(engine_config)``: ``running`` turns generate at once (the engine's batch,
``engine.max_running_requests``, per worker behind a gateway) and ``waiting`` more may wait
for one (``engine.max_queue``). For the embedded engine these are its own limits; the CPU
profile's ``appliance engine-server`` reads the same config. A GPU SGLang server is launched
with its own ``--max-running-requests`` and is not asked at start-up (it may start later than
the app): there the config's numbers are what the app lets in, and the admin console shows
what the server runs.

``TurnLine``: first come, first served. A turn joins the line and gets a ``Ticket``; it starts
once fewer than ``slots`` turns run and no one is ahead of it, and holds its slot until it
leaves. While it waits, ``Ticket.ahead()`` says how many are ahead of it, so the page can say
where the question is. Thread-safe; one line per chat page (per process).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass

from appliance.core.config import EngineConfig


@dataclass(frozen=True)
class TurnCapacity:
    running: int  # turns generating at once
    waiting: int  # turns that may wait for a free slot

    @property
    def total(self) -> int:
        return self.running + self.waiting

    @classmethod
    def of(cls, engine: EngineConfig) -> TurnCapacity:
        """The capacity the config gives the engine the app talks to."""
        workers = len(engine.sglang_worker_urls) if engine.backend == "sglang" else 0
        return cls(engine.max_running_requests * max(1, workers), engine.max_queue)


class Ticket:
    """A turn's place in a ``TurnLine``: waiting, then admitted, then gone."""

    def __init__(self, line: TurnLine) -> None:
        self._line = line
        self.admitted = False
        self.left = False

    def ahead(self) -> int:
        """Turns waiting ahead of this one (0: it is next); 0 once admitted."""
        return self._line._ahead(self)

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for a slot; True once admitted."""
        return self._line._wait(self, timeout_s)

    def leave(self) -> None:
        """Give up the slot, or the place in line; idempotent."""
        self._line._leave(self)


class TurnLine:
    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError("a turn line needs at least one slot")
        self.slots = slots
        self._changed = threading.Condition()
        self._running = 0
        self._waiting: deque[Ticket] = deque()  # invariant: admitted tickets are never here

    def join(self) -> Ticket:
        """A new ticket at the end of the line (admitted at once when a slot is free)."""
        ticket = Ticket(self)
        with self._changed:
            self._waiting.append(ticket)
            self._admit()
        return ticket

    def counts(self) -> tuple[int, int]:
        """(running, waiting) now."""
        with self._changed:
            return self._running, len(self._waiting)

    def _admit(self) -> None:  # holds the lock
        admitted = False
        while self._waiting and self._running < self.slots:
            self._waiting.popleft().admitted = admitted = True
            self._running += 1
        if admitted:
            self._changed.notify_all()

    def _ahead(self, ticket: Ticket) -> int:
        with self._changed:
            return 0 if ticket.admitted or ticket.left else self._waiting.index(ticket)

    def _wait(self, ticket: Ticket, timeout_s: float) -> bool:
        with self._changed:
            self._changed.wait_for(lambda: ticket.admitted or ticket.left, timeout_s)
            return ticket.admitted and not ticket.left

    def _leave(self, ticket: Ticket) -> None:
        with self._changed:
            if ticket.left:
                return
            ticket.left = True
            if ticket.admitted:
                self._running -= 1
            else:
                self._waiting.remove(ticket)
            self._admit()
            self._changed.notify_all()  # the places behind it moved up
