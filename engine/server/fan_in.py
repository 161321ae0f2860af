"""Several answer streams read at once, for one streamed response (a batch, or ``n`` > 1).

One stream is read on the caller's thread. Several are each read by their own thread; the
items come out in the order they arrive, each with its stream's index. Closing the reader
cancels every stream still running (by request id, which is safe from any thread); each
reading thread then sees its stream end and closes it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator

from engine.base import StreamItem
from engine.server.running import TrackedStream

_END = object()


def fan_in(streams: list[TrackedStream]) -> Generator[tuple[int, StreamItem], None, None]:
    """``(index, item)`` from every stream until all have ended; a stream's failure is
    raised here, after which the others are cancelled."""
    if len(streams) == 1:
        try:
            for item in streams[0]:
                yield 0, item
        finally:
            streams[0].close()
        return
    inbox: queue.Queue = queue.Queue()

    def pump(index: int, stream: TrackedStream) -> None:
        try:
            for item in stream:
                inbox.put((index, item))
            inbox.put((index, _END))
        except BaseException as exc:  # handed to the reader, which raises it
            inbox.put((index, exc))
        finally:
            stream.close()

    threads = [
        threading.Thread(target=pump, args=(i, s), name=f"fan-in-{i}", daemon=True)
        for i, s in enumerate(streams)
    ]
    for thread in threads:
        thread.start()
    running = len(streams)
    try:
        while running:
            index, item = inbox.get()
            if item is _END:
                running -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield index, item
    finally:
        cancel_all(streams)


def cancel_all(streams: list[TrackedStream]) -> None:
    """Ask the engine to stop every stream still running (safe from any thread)."""
    for stream in streams:
        stream.cancel()
