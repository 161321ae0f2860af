"""Turning generated token ids into safe text deltas (pure logic, no model).

Two rules: never emit a partial UTF-8 character (the tokenizer decodes an incomplete byte
sequence as U+FFFD), and never emit text that might turn out to be the start of a stop string.

Decoding is incremental, so a token costs the same at the end of a long answer as at its
start. Decoding every id again for each token cost 0.29 ms a token at 1,000 tokens and
0.57 ms at 2,000 (SmolLM2's tokenizer): 0.15 s over a 1,000-token answer, paid on the
scheduler's thread once per stream.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

REPLACEMENT = "\ufffd"
# settle the text after this many tokens past the last settled point: the decoded window is
# at most twice this long
SETTLE_EVERY = 8


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
    """The text of ``ids`` as ``decode`` gives it, handed out in safe deltas.

    Invariant: ``decode(ids[:_settled]) == _base`` and ``decode(ids[_context:_settled]) ==
    _context_text``. A new token decodes only ``ids[_context:]``; the context tokens in
    front keep the tokenizer's view of the boundary (a SentencePiece word's leading space,
    say), and the part after ``_context_text`` is the new text. Where the window's text does
    not begin with the context's own (a clean-up rule across the boundary), the stream
    decodes every id instead, so the text always equals ``decode(ids)``.
    """

    decode: Callable[[list[int]], str]
    stops: tuple[str, ...] = ()
    ids: list[int] = field(default_factory=list)
    emitted: int = 0  # chars of the final text already handed out
    stopped: bool = False
    matched: str | None = None  # the stop string that ended the text
    text: str = ""
    _base: str = ""
    _settled: int = 0
    _context: int = 0
    _context_text: str = ""
    _searched: int = 0  # no stop string begins before this many chars of the text

    def push(self, token_id: int) -> str:
        """Add one token; return the newly safe text (may be empty)."""
        if self.stopped:
            return ""
        self.ids.append(token_id)
        full = self._decoded()
        for stop in self.stops:
            cut = full.find(stop, max(0, self._searched - len(stop) + 1))
            if cut != -1:
                self.stopped = True
                self.matched = stop  # a later cut is an earlier position
                full = full[:cut]
        if not self.stopped:
            # trailing U+FFFD may still become another character: search it again next time
            self._searched = len(full.rstrip(REPLACEMENT))
            if full.endswith(REPLACEMENT):
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

    def _decoded(self) -> str:
        """``decode(self.ids)``, decoding only the ids since the last settled point."""
        window = self.decode(self.ids[self._context :])
        if not window.startswith(self._context_text):
            full = self.decode(self.ids)  # the boundary changed the context's text
            self._base, self._settled = full, len(self.ids)
            # one token of context, so the next token is decoded after a word, as in the text
            self._context = self._settled - 1
            self._context_text = self.decode(self.ids[self._context :])
            self._searched = 0
            return full
        full = self._base + window[len(self._context_text) :]
        if len(self.ids) - self._settled >= SETTLE_EVERY and not full.endswith(REPLACEMENT):
            self._context, self._settled, self._base = self._settled, len(self.ids), full
            self._context_text = self.decode(self.ids[self._context : self._settled])
        return full
