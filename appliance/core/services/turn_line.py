"""How many chat turns the engine takes at once, and the line the chat page's turns wait in.

``TurnCapacity.of(engine_config, chat_config)``: ``running`` turns generate at once (the
engine's batch, ``engine.max_running_requests``, per worker behind a gateway) and ``waiting``
more may wait for one (``engine.max_queue``). For the embedded engine these are its own
limits; the CPU profile's ``appliance engine-server`` reads the same config. A GPU SGLang
server is launched with its own ``--max-running-requests`` and is not asked at start-up (it
may start later than the app): there the config's numbers are what the app lets in, and the
admin console shows what the server runs. Each person's share is ``chat.user_running_turns``
generating and ``chat.user_waiting_turns`` waiting.

``TurnLine``: first come, first served, within each person's share. A turn joins the line and
gets a ``Ticket``, or is refused at once (``TurnRefused``) when its user already has their
share in the line, or when the line's waiting places are all taken. A ticket starts once fewer
than ``slots`` turns run, its user runs fewer than their share, and no one who could start is
ahead of it; it holds its slot until it leaves. While it waits, ``Ticket.ahead()`` says how
many are ahead of it, so the page can say where the question is. Thread-safe; one line per
chat page (per process).
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Literal

from appliance.core.config import ChatConfig, EngineConfig


@dataclass(frozen=True)
class TurnCapacity:
    running: int  # turns generating at once
    waiting: int  # turns that may wait for a free slot
    user_running: int = 2  # one person's turns generating at once
    user_waiting: int = 2  # one person's turns waiting

    @property
    def total(self) -> int:
        return self.running + self.waiting

    @property
    def per_user(self) -> int:
        return self.user_running + self.user_waiting

    @classmethod
    def of(cls, engine: EngineConfig, chat: ChatConfig | None = None) -> TurnCapacity:
        """The capacity the config gives the engine the app talks to, and each user."""
        chat = chat or ChatConfig()
        workers = len(engine.sglang_worker_urls) if engine.backend == "sglang" else 0
        return cls(
            engine.max_running_requests * max(1, workers),
            engine.max_queue,
            chat.user_running_turns,
            chat.user_waiting_turns,
        )


class TurnRefused(Exception):
    """The line did not take a turn: ``reason`` "yours" (its user already has ``limit`` turns
    in the line) or "full" (``limit`` turns already wait)."""

    def __init__(self, reason: Literal["yours", "full"], limit: int) -> None:
        super().__init__(f"turn refused ({reason}, limit {limit})")
        self.reason = reason
        self.limit = limit


class Ticket:
    """A turn's place in a ``TurnLine``: waiting, then admitted, then gone."""

    def __init__(self, line: TurnLine, user: Hashable) -> None:
        self._line = line
        self.user = user
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
    def __init__(self, capacity: TurnCapacity | int) -> None:
        """A line for ``capacity`` (a bare number: that many slots, no other bound)."""
        if isinstance(capacity, int):
            capacity = TurnCapacity(capacity, 1 << 30, capacity, 1 << 30)
        if capacity.running < 1 or capacity.user_running < 1:
            raise ValueError("a turn line needs at least one slot, and one for each user")
        self.capacity = capacity
        self.slots = capacity.running
        self._changed = threading.Condition()
        self._running = 0
        self._waiting: deque[Ticket] = deque()  # invariant: admitted tickets are never here
        self._running_of: Counter[Hashable] = Counter()  # user -> admitted tickets
        self._held_of: Counter[Hashable] = Counter()  # user -> admitted and waiting tickets

    def join(self, user: Hashable = None) -> Ticket:
        """A new ticket for ``user`` at the end of the line (admitted at once when a slot is
        free); ``TurnRefused`` when the user's share or the waiting places are all taken."""
        ticket = Ticket(self, user)
        with self._changed:
            if self._held_of[user] >= self.capacity.per_user:
                raise TurnRefused("yours", self.capacity.per_user)
            self._waiting.append(ticket)
            self._admit()
            if not ticket.admitted and len(self._waiting) > self.capacity.waiting:
                self._waiting.remove(ticket)  # nobody else moved: it was last
                raise TurnRefused("full", self.capacity.waiting)
            self._held_of[user] += 1
        return ticket

    def counts(self) -> tuple[int, int]:
        """(running, waiting) now."""
        with self._changed:
            return self._running, len(self._waiting)

    def _admit(self) -> None:  # holds the lock
        admitted = False
        for ticket in list(self._waiting):
            if self._running >= self.slots:
                break
            if self._running_of[ticket.user] >= self.capacity.user_running:
                continue  # its user's share runs: the next one in line may start
            self._waiting.remove(ticket)
            ticket.admitted = admitted = True
            self._running += 1
            self._running_of[ticket.user] += 1
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
            user = ticket.user
            if ticket.admitted:
                self._running -= 1
                self._running_of[user] -= 1
                if not self._running_of[user]:
                    del self._running_of[user]
            else:
                self._waiting.remove(ticket)
            self._held_of[user] -= 1
            if not self._held_of[user]:
                del self._held_of[user]
            self._admit()
            self._changed.notify_all()  # the places behind it moved up
