"""The chat page's turn line: as many turns run as there are slots, the rest wait first come
first served and know how many are ahead; a turn that leaves (ended, stopped, page closed)
frees its slot or its place. And the capacity the config gives the engine."""

from __future__ import annotations

import threading
import time

import pytest

from appliance.core.config import ChatConfig, EngineConfig
from appliance.core.services.turn_line import TurnCapacity, TurnLine, TurnRefused


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


def _line(running: int = 4, waiting: int = 4, user_running: int = 2, user_waiting: int = 1):
    return TurnLine(TurnCapacity(running, waiting, user_running, user_waiting))


def test_the_capacity_carries_each_users_share() -> None:
    chat = ChatConfig(user_running_turns=3, user_waiting_turns=1)
    assert TurnCapacity.of(EngineConfig(), chat) == TurnCapacity(8, 16, 3, 1)
    assert TurnCapacity.of(EngineConfig()).per_user == 4  # 2 running and 2 waiting by default


def test_one_user_is_refused_beyond_their_share_and_others_still_start() -> None:
    """Issue #30: one cookie queued 50 turns, all accepted. Now a user holds at most their
    share (2 running, 1 waiting here); the next is refused at once, and another user's turn
    starts ahead of the flooder's waiting one, on a free slot."""
    line = _line()
    mine = [line.join("flood") for _ in range(3)]
    assert [t.admitted for t in mine] == [True, True, False]  # two run, one waits
    with pytest.raises(TurnRefused) as refused:
        line.join("flood")
    assert (refused.value.reason, refused.value.limit) == ("yours", 3)
    other = line.join("other")
    assert other.admitted  # not behind the flooder's waiting turn: a slot was free
    assert line.counts() == (3, 1)
    mine[0].leave()  # one of the flooder's answers ends: their waiting turn starts
    assert mine[2].admitted
    again = line.join("flood")  # and they may queue one more
    assert not again.admitted and again.ahead() == 0
    for t in (*mine, other, again):
        t.leave()
    assert line.counts() == (0, 0)
    assert [line.join("flood").admitted for _ in range(2)] == [True, True]  # shares are freed


def test_the_waiting_places_are_bounded() -> None:
    """Beyond the engine's queue (``waiting``) a turn is refused as "full", whoever asks."""
    line = _line(running=1, waiting=2, user_running=1, user_waiting=1)
    running = line.join("a")
    waiting = [line.join("b"), line.join("c")]
    assert running.admitted and not any(t.admitted for t in waiting)
    with pytest.raises(TurnRefused) as refused:
        line.join("d")
    assert (refused.value.reason, refused.value.limit) == ("full", 2)
    assert line.counts() == (1, 2)  # the refused turn left no trace
    waiting[0].leave()
    assert not line.join("d").admitted  # a freed place is taken again


def test_a_user_at_their_running_share_does_not_hold_up_the_line() -> None:
    """A waiting turn whose user already runs their share is passed by the next one in line,
    and starts as soon as one of its user's turns ends."""
    line = _line(running=3, waiting=4, user_running=1, user_waiting=2)
    first = line.join("a")
    second = line.join("a")
    third = line.join("b")
    assert (first.admitted, second.admitted, third.admitted) == (True, False, True)
    first.leave()
    assert second.admitted
