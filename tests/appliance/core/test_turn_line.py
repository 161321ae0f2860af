"""The chat page's turn line: as many turns run as there are slots, the rest wait first come
first served and know how many are ahead; a turn that leaves (ended, stopped, page closed)
frees its slot or its place. And the capacity the config gives the engine."""

from __future__ import annotations

import threading
import time

import pytest

from appliance.core.config import EngineConfig
from appliance.core.services.turn_line import TurnCapacity, TurnLine


def test_capacity_is_the_engine_batch_and_its_queue() -> None:
    assert TurnCapacity.of(EngineConfig()) == TurnCapacity(running=8, waiting=16)
    assert TurnCapacity.of(EngineConfig()).total == 24
    small = EngineConfig(max_running_requests=2, max_queue=3)
    assert TurnCapacity.of(small).total == 5
    # behind a gateway every worker runs its own batch
    gateway = EngineConfig(backend="sglang", sglang_worker_urls=("http://a", "http://b"))
    assert TurnCapacity.of(gateway) == TurnCapacity(running=16, waiting=16)
    # the embedded backend ignores worker URLs
    assert TurnCapacity.of(EngineConfig(sglang_worker_urls=("http://a",))).running == 8


def test_turns_beyond_the_slots_wait_in_order_and_move_up() -> None:
    line = TurnLine(2)
    a, b, c, d = (line.join() for _ in range(4))
    assert (a.admitted, b.admitted, c.admitted, d.admitted) == (True, True, False, False)
    assert (c.ahead(), d.ahead()) == (0, 1)
    assert line.counts() == (2, 2)
    assert not c.wait(0.01)

    a.leave()  # an answer ended: the first in line starts
    assert c.wait(0) and c.ahead() == 0
    assert d.ahead() == 0 and not d.admitted
    a.leave()  # leaving twice changes nothing
    assert line.counts() == (2, 1)

    e = line.join()
    assert e.ahead() == 1
    d.leave()  # stopped while waiting: its place goes, the one behind moves up
    assert e.ahead() == 0 and line.counts() == (2, 1)
    for ticket in (b, c):
        ticket.leave()
    assert e.admitted and line.counts() == (1, 0)
    e.leave()
    assert line.counts() == (0, 0)


def test_a_waiting_turn_wakes_when_a_slot_frees() -> None:
    line = TurnLine(1)
    first, second = line.join(), line.join()
    started: list[float] = []

    def waiter() -> None:
        if second.wait(10):
            started.append(time.monotonic())

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.2)
    assert not started  # still waiting
    freed = time.monotonic()
    first.leave()
    thread.join(5)
    assert started and started[0] - freed < 1.0


def test_a_line_needs_a_slot() -> None:
    with pytest.raises(ValueError):
        TurnLine(0)
