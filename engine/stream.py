"""The iterator shape every backend's answer stream shares.

An ``EngineStream`` hands out ``StreamItem``s from an inner iterator and keeps one rule: it is
closed exactly once, whichever comes first: the ``Finished`` item has been read (subclasses
decide whether that closes at once), the inner iterator failed, or the reader called
``close()``. ``_release(finished)`` then frees what the stream holds; ``finished`` is False when
the answer was cut short, so the backend cancels the request.
"""

from __future__ import annotations

from collections.abc import Iterator

from engine.base import EngineError, Finished, GenerationStats, StreamItem


class EngineStream:
    """An iterator of ``StreamItem`` that is also a context manager."""

    def __init__(self, items: Iterator[StreamItem]) -> None:
        self.stats: GenerationStats | None = None  # set by the ``Finished`` item
        self._items = items
        self._closed = False

    def __iter__(self) -> EngineStream:
        return self

    def __next__(self) -> StreamItem:
        if self._closed:
            raise StopIteration
        try:
            item = next(self._items)
        except StopIteration:
            self.close()
            if self.stats is None:
                raise EngineError("the engine ended the stream without final stats") from None
            raise
        except BaseException:
            self.close()
            raise
        if isinstance(item, Finished):
            self.stats = item.stats
            self._on_finished()
        return item

    def __enter__(self) -> EngineStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop reading; cancels the request if its answer is not finished. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._release(finished=self.stats is not None)

    def _on_finished(self) -> None:
        """Called once the ``Finished`` item has been read, before it is returned."""

    def _release(self, finished: bool) -> None:
        """Free what the stream holds (called once, from ``close``)."""
