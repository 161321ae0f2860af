"""Prompt-lookup drafts: guess a request's next tokens from its own token history.

A RAG answer copies runs of tokens from the documents in its prompt (names, numbers, whole
phrases), and a looping answer repeats itself. So the tokens that followed the last earlier
occurrence of the history's last ``n`` tokens are a cheap guess at what comes next (prompt
lookup decoding, Saxena 2023; vLLM's and SGLang's ``ngram`` speculative mode). Longer n-grams
are tried first: they are rarer, so a match predicts better. For the same reason a draft is no
longer than the match behind it, ``n`` tokens, except from the longest n-gram size, which
proposes up to ``max_tokens``: a lone token seen before is weak evidence for a run after it,
and each draft costs its step a row. Measured on grounded RAG answers, one stream, in one
engine taking turns (2 vCPUs, Zen 4): on ÷ off 1.39x / 1.32x → 1.45x / 1.43x on the dev
questions, and 0.97x / 1.08x → 1.05x / 1.14x held out, at 1.77 → 1.67 and 1.23 → 1.20
tokens a step (fewer drafts, fewer wasted rows).

With a pool of earlier answers (``draft_pool.py``), a suffix the pool matches with a longer
n-gram than the history does is drafted from there instead.

The index maps every n-gram (for each n in ``sizes``) that has a token after it to the
position of that token, the latest occurrence winning; it grows as tokens are appended, so a
lookup costs O(len(sizes)) whatever the history's length. Pure Python over token ids; no
tensors, no engine state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.embedded.draft_pool import DraftPool


@dataclass(frozen=True)
class DraftConfig:
    """``max_tokens``: drafts proposed per step (at most); ``min_ngram`` .. ``max_ngram``:
    the suffix lengths tried, longest first."""

    max_tokens: int = 4
    min_ngram: int = 1
    max_ngram: int = 3

    def __post_init__(self) -> None:
        if self.max_tokens < 1 or not 1 <= self.min_ngram <= self.max_ngram:
            raise ValueError("draft config: need max_tokens >= 1 and 1 <= min_ngram <= max_ngram")


# The pool (earlier answers) is matched with n-grams one longer than the request's own (an
# earlier answer that shares 4 tokens with this one likely goes on alike: a question asked
# again drafts its whole earlier answer even where its documents hold the same 3 tokens), and
# never on a single token (another answer's lone token is a stock phrase's guess: accepted
# 4-11% of the time). Replayed on the speculation-off answers of ``appliance bench engine
# --speculative`` (drafts of up to 4, the pool holding the other question sets' answers), in
# tokens a step against matching the pool like the own history (1-3 tokens): dev questions 1.59
# against 1.61, held out 1.23 against 1.24, open-ended 1.40 against 1.41, with fewer pool drafts
# on the last two (428 against 481, 126 against 200), and a question asked again 4.58 against
# 4.24. Own history alone: 1.52, 1.18, 1.38.
POOL_MIN_NGRAM = 2


class NgramDrafter:
    """One request's history (prompt, then its answer) and its n-gram index; with a ``pool``
    (``draft_pool.py``), earlier answers too."""

    def __init__(
        self, config: DraftConfig, history: Iterable[int] = (), pool: DraftPool | None = None
    ) -> None:
        self.config = config
        self.sizes = range(config.max_ngram, config.min_ngram - 1, -1)
        self.pool = pool if pool is not None and pool.enabled else None
        self.tokens: list[int] = []
        self._next: dict[tuple[int, ...], int] = {}  # n-gram -> position of the token after it
        self.extend(history)

    def extend(self, tokens: Iterable[int]) -> None:
        for token in tokens:
            self.append(token)

    def append(self, token: int) -> None:
        """Add ``token``; index the n-grams that end just before it (it follows them)."""
        toks = self.tokens
        end = len(toks)  # ``token``'s position
        toks.append(token)
        for n in self.sizes:
            if end >= n:
                self._next[tuple(toks[end - n : end])] = end

    def _own(self, k: int) -> tuple[int, list[int]]:
        """(n, up to ``k`` tokens) after the latest earlier occurrence of the longest suffix."""
        toks = self.tokens
        for n in self.sizes:
            if len(toks) <= n:
                continue
            at = self._next.get(tuple(toks[-n:]))
            if at is not None:
                return n, toks[at : at + k]
        return 0, []

    def propose(self, limit: int | None = None) -> list[int]:
        """Up to ``limit`` (default ``max_tokens``) tokens guessed to follow the history, no
        more than the match's length below the longest n-gram size; empty when no suffix of
        it occurred before. The pool is asked only for a longer match than the history's own
        (the request's own documents predict its answer better than other answers do)."""
        k = self.config.max_tokens if limit is None else min(limit, self.config.max_tokens)
        if k <= 0:
            return []
        n, draft = self._own(k)
        if self.pool is not None and n < self.pool.max_ngram:
            pool_n, pool_draft = self.pool.match(self.tokens, k)
            if pool_n > n and pool_n >= max(POOL_MIN_NGRAM, self.config.min_ngram):
                n, draft = pool_n, pool_draft
        return draft if n >= self.config.max_ngram else draft[: min(k, n)]
