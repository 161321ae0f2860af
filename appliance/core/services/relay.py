"""The engine's stream as chat events, through the repeat guard (``rag.repeats``).

The text shown is the text stored: a repeat the guard holds back is never sent, and once the
answer repeats itself generation is aborted through the engine's ``abort`` (SGLang's
``/abort_request``), so the engine's last ``Finished`` still reports the turn's real token
counts and timings.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, replace

from engine.base import Engine, EngineError, Finished, GenerateRequest, GenerationStats, TextDelta
from rag.repeats import RepeatGuard

# the stored finish reason of an answer the guard stopped (the engine's own are stop,
# length and abort)
REPETITION = "repetition"


@dataclass(frozen=True)
class Generation:
    """A submitted request: its stream, its id (to abort it) and its repeat guard (None:
    the repeat stop is off)."""

    stream: Iterator
    rid: str
    guard: RepeatGuard | None


def start(
    engine: Engine, request: GenerateRequest, stop_repeats: bool, said_before: str = ""
) -> Generation:
    """Submit ``request`` under a fresh id, with a repeat guard when ``stop_repeats``
    (``said_before``: text the reader has already, which the answer must not repeat).
    Engine refusals (busy, too long, down) propagate."""
    rid = uuid.uuid4().hex
    stream = engine.generate(replace(request, request_id=rid))
    return Generation(stream, rid, RepeatGuard(said_before) if stop_repeats else None)


@dataclass(frozen=True)
class Relayed:
    """How a stream ended: the engine's stats, and whether the guard stopped a repeat."""

    stats: GenerationStats
    repeated: bool = False

    @property
    def finish(self) -> str:
        """The finish reason to store: ``repetition`` for a stopped repeat."""
        return REPETITION if self.repeated else self.stats.finish_reason


def relay(
    stream: Iterator,
    parts: list[str],
    guard: RepeatGuard | None,
    abort: Callable[[], object],
) -> Generator[str, None, Relayed | None]:
    """Yield the text to show, collected into ``parts`` too; return how the stream ended,
    or None when the reader left (generation is then cancelled by closing the stream).
    ``abort`` cancels the request at the engine once ``guard`` has seen a repeat.
    Engine errors propagate."""
    stats: GenerationStats | None = None
    aborted = False
    try:
        for item in stream:
            if isinstance(item, TextDelta):
                shown = guard.push(item.text) if guard is not None else item.text
                if shown:
                    parts.append(shown)
                    yield shown
                if guard is not None and guard.repeated and not aborted:
                    aborted = True
                    abort()  # the stream still ends with the engine's Finished
            elif isinstance(item, Finished):
                stats = item.stats
        if guard is not None and stats is not None:
            rest = guard.finish()
            if rest:
                parts.append(rest)
                yield rest
    finally:
        if stats is None:
            stream.close()  # the reader left or the engine failed: cancel generation
    if stats is None:
        raise EngineError("the engine's stream ended without its final stats")
    return Relayed(stats, guard is not None and guard.repeated)
