"""Stop an answer that starts repeating itself, before the reader sees the repeat (pure).

A small model that gets stuck says the same sentence again and again until the length limit
("Click Reset password." six times). Penalties (``repetition_penalty``) make that rare; this
guard makes it impossible to show. It reads the answer as it streams:

- a sentence of at least ``MIN_SENTENCE_WORDS`` words that was said before is a repeat;
- so is a run of ``RUN_WORDS`` words said for the ``RUN_TIMES``-th time (a loop inside one
  long sentence or list line).

Words are compared case-folded, punctuation aside. While the sentence being written still
reads like the start of a sentence already said, it is held back, so a repeat is never
released; any other text is released at once. On a repeat the guard stops: the answer is
the text before the repeating sentence, and the caller cancels generation.
"""

from __future__ import annotations

import re
from collections import Counter

MIN_SENTENCE_WORDS = 4
RUN_WORDS = 8
RUN_TIMES = 3
_END = re.compile(r"[.!?。…](?=\s)|\n")
_WORD = re.compile(r"\w+")


class RepeatGuard:
    """Feed it the streamed text with ``push``; it returns what may be shown now."""

    def __init__(self, said_before: str = "") -> None:
        """``said_before``: text the reader already has (an answer being continued); its
        sentences count as said, and it is not shown again."""
        self._text = ""
        self._released = 0  # characters of _text handed out
        self._start = 0  # where the sentence being written starts
        self._said: set[tuple[str, ...]] = set()
        self._runs: Counter[tuple[str, ...]] = Counter()
        self._words: list[tuple[str, int]] = []  # (word, start) of every complete word
        self._cut: int | None = None
        if said_before:
            self.push(said_before)
            self.finish()
            self._base = len(self._text)
        else:
            self._base = 0

    @property
    def repeated(self) -> bool:
        """Whether the answer repeated itself (the guard has stopped)."""
        return self._cut is not None

    @property
    def answer(self) -> str:
        """The answer so far (after ``said_before``): everything pushed, or the text before
        the repeat."""
        end = len(self._text) if self._cut is None else self._cut
        return self._text[self._base : end]

    def push(self, delta: str) -> str:
        """Add generated text; returns the text that may be shown now ('' once stopped)."""
        if self._cut is not None:
            return ""
        self._text += delta
        self._scan_words()
        if self._cut is None:
            self._scan_sentences()
        end = self._cut if self._cut is not None else self._safe_end()
        out = self._text[self._released : max(end, self._released)]
        self._released = max(end, self._released)
        return out

    def finish(self) -> str:
        """The generation ended by itself: the rest of the held text."""
        if self._cut is not None:
            return ""
        tail = self._text[self._start :]
        words = tuple(w.casefold() for w in _WORD.findall(tail))
        if len(words) >= MIN_SENTENCE_WORDS and words in self._said:  # ended on a repeat
            self._cut = max(len(self._text[: self._start].rstrip()), self._released)
            return ""
        out = self._text[self._released :]
        self._released = len(self._text)
        return out

    # ---- scanning -------------------------------------------------------------------------

    def _scan_words(self) -> None:
        """Count the runs of the words completed since the last push (a word is complete once
        a character that is not part of it follows)."""
        known = self._words[-1][1] + len(self._words[-1][0]) if self._words else 0
        for m in _WORD.finditer(self._text, known):
            if m.end() == len(self._text):
                break  # it may go on in the next delta
            self._words.append((m.group().casefold(), m.start()))
            if len(self._words) < RUN_WORDS:
                continue
            run = tuple(w for w, _ in self._words[-RUN_WORDS:])
            self._runs[run] += 1
            if self._runs[run] >= RUN_TIMES:
                first = self._words[-RUN_WORDS][1]
                # cut at the sentence the run starts in, if that keeps what was shown
                start = self._sentence_start(first)
                self._cut = max(start if start >= self._released else first, self._released)
                return

    def _scan_sentences(self) -> None:
        for m in _END.finditer(self._text, self._start):
            end = m.end()
            words = tuple(w.casefold() for w in _WORD.findall(self._text[self._start : end]))
            if len(words) >= MIN_SENTENCE_WORDS and words in self._said:
                self._cut = max(len(self._text[: self._start].rstrip()), self._released)
                return
            if len(words) >= MIN_SENTENCE_WORDS:
                self._said.add(words)
            self._start = end

    def _sentence_start(self, pos: int) -> int:
        """Where the sentence holding ``pos`` starts."""
        last = 0
        for m in _END.finditer(self._text, 0, pos):
            last = m.end()
        return last

    def _safe_end(self) -> int:
        """Everything but the sentence being written while it could still become a repeat."""
        tail = self._text[self._start :]
        words = [w.casefold() for w in _WORD.findall(tail)]
        if not words:
            return len(self._text)
        partial = bool(tail) and bool(_WORD.fullmatch(tail[-1]))  # the last word may go on
        for said in self._said:
            if len(said) < len(words):
                continue
            whole, last = words[:-1] if partial else words, words[-1]
            if list(said[: len(whole)]) == whole and (
                not partial or said[len(whole)].startswith(last)
            ):
                return self._start  # hold it: it reads like a sentence already said
        return len(self._text)
