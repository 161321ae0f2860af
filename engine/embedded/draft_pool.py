"""Drafts from earlier answers: an n-gram index over the answers the engine gave before.

A request's own prompt and answer (``ngram_draft.py``) are where a RAG answer copies from, but
answers also share their wording with one another: the model's stock phrases ("The answer
is:", "according to the handbook"), a policy's sentences retold in its own way, and, for the
questions staff ask again and again, the whole answer. SGLang's ``NGRAM`` mode keeps such a
pool across requests. So does this one: every answer a speculating request finishes is
indexed here, and a request drafts from the pool when it holds a *longer* match for the
history's last tokens than the request's own history does (``NgramDrafter.propose``).

Bounded memory: the pool holds at most ``capacity`` answer tokens, in two generations. New
answers go into the newer one; when it is full, the older is dropped and a fresh one started,
so the pool always holds the last ``capacity / 2`` to ``capacity`` tokens of answers. Each
answer's n-grams are indexed within the answer only (a draft never runs into the next one).

Privacy: drafts only change how fast a request's own tokens are emitted, never which tokens
(``spec_verify.verify``), so a user sees nothing of another's answer; a speed difference
could only hint that some earlier answer shared n-grams with the model's output for them.
Sites that want no such link between users set the pool's capacity to 0.
Thread-safe: the scheduler's thread reads it while finished answers are added.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence


class _Generation:
    """Answers' tokens, each followed by a separator, and the index of their n-grams."""

    SEP = -1

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.next: dict[tuple[int, ...], int] = {}  # n-gram -> position after it, latest wins
        self.answer_tokens = 0

    def add(self, answer: Sequence[int], sizes: range) -> None:
        start = len(self.tokens)
        self.tokens.extend(answer)
        self.tokens.append(self.SEP)
        self.answer_tokens += len(answer)
        toks = self.tokens
        for end in range(start + 1, start + len(answer)):  # a token with an n-gram before it
            for n in sizes:
                if end - n >= start:
                    self.next[tuple(toks[end - n : end])] = end


class DraftPool:
    """Earlier answers' n-grams of sizes 1 .. ``max_ngram``, for drafting (see the module)."""

    def __init__(self, capacity: int, max_ngram: int) -> None:
        if capacity < 0 or max_ngram < 1:
            raise ValueError("draft pool: need capacity >= 0 and max_ngram >= 1")
        self.capacity = capacity
        self.max_ngram = max_ngram
        self._sizes = range(max_ngram, 0, -1)
        self._gens: list[_Generation] = [_Generation()]  # newest first, at most two
        self._lock = threading.Lock()
        # the engine adds answers only while learning; a benchmark turns it off to decide
        # itself what the pool holds (never the answer it is about to time)
        self.learning = True

    @property
    def enabled(self) -> bool:
        return self.capacity > 0

    @property
    def size(self) -> int:
        """Answer tokens held (separators not counted)."""
        with self._lock:
            return sum(g.answer_tokens for g in self._gens)

    def add(self, answer: Sequence[int]) -> None:
        """Index ``answer`` (token ids; at most half the capacity of it is kept)."""
        half = self.capacity // 2
        answer = list(answer[:half])
        if not self.enabled or len(answer) < 2:
            return
        with self._lock:
            newest = self._gens[0]
            if newest.tokens and len(newest.tokens) + len(answer) + 1 > half:
                self._gens = [_Generation(), newest]
                newest = self._gens[0]
            newest.add(answer, self._sizes)

    def clear(self) -> None:
        with self._lock:
            self._gens = [_Generation()]

    def match(self, history: Sequence[int], limit: int) -> tuple[int, list[int]]:
        """``(n, tokens)``: up to ``limit`` tokens that followed the latest earlier occurrence
        of ``history``'s last ``n`` tokens in an answer, for the largest such ``n`` (newer
        answers first); ``(0, [])`` when none matched."""
        if limit <= 0 or not self.enabled:
            return 0, []
        with self._lock:
            for n in self._sizes:
                if len(history) < n:
                    continue
                key = tuple(history[-n:])
                for gen in self._gens:
                    at = gen.next.get(key)
                    if at is None:
                        continue
                    run = gen.tokens[at : at + limit]
                    if _Generation.SEP in run:
                        run = run[: run.index(_Generation.SEP)]
                    if run:
                        return n, run
        return 0, []
