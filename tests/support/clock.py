"""A clock a test moves by hand (the login throttle's ``clock``): no test sleeps through a
back-off or a window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class Clock:
    """Starts at a fixed time; ``advance`` moves it on."""

    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
