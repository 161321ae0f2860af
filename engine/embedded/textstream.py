"""Turning generated token ids into safe text deltas (pure logic, no model).

Two rules: never emit a partial UTF-8 character (the tokenizer decodes an incomplete byte
sequence as U+FFFD), and never emit text that might turn out to be the start of a stop string.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

REPLACEMENT = "\ufffd"


def _holdback(text: str, stops: Sequence[str]) -> int:
    """How many trailing chars of ``text`` could still begin one of ``stops``."""
    keep = 0
    for stop in stops:
        for n in range(min(len(stop) - 1, len(text)), 0, -1):
            if text.endswith(stop[:n]):
                keep = max(keep, n)
                break
    return keep


@dataclass
class TextStream:
    decode: Callable[[list[int]], str]
    stops: tuple[str, ...] = ()
    ids: list[int] = field(default_factory=list)
    emitted: int = 0  # chars of the final text already handed out
    stopped: bool = False
    matched: str | None = None  # the stop string that ended the text
    text: str = ""

    def push(self, token_id: int) -> str:
        """Add one token; return the newly safe text (may be empty)."""
        self.ids.append(token_id)
        full = self.decode(self.ids)
        for stop in self.stops:
            cut = full.find(stop)
            if cut != -1:
                self.stopped = True
                self.matched = stop  # a later cut is an earlier position
                full = full[:cut]
        if not self.stopped and full.endswith(REPLACEMENT):
            return ""  # an incomplete multi-byte character: wait for its next byte
        self.text = full
        safe = len(full) if self.stopped else len(full) - _holdback(full, self.stops)
        if safe <= self.emitted:
            return ""
        out = full[self.emitted : safe]
        self.emitted = safe
        return out

    def flush(self) -> str:
        """At the end of generation: whatever was held back (stop-string prefixes)."""
        text = self.text
        if text.endswith(REPLACEMENT):
            text = text.rstrip(REPLACEMENT)
        out = text[self.emitted :]
        self.emitted = len(text)
        self.text = text
        return out
