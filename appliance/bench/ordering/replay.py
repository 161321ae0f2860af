"""Replaying a workload through an ordering strategy, the way the chat service lays out turns.

Each turn is laid out by ``rag.layout`` after the session's conversation so far, as the chat
service does it (``append``: only chunks new to the prompt, ordered by the strategy, which is
offered the turn's candidates beyond the top-k that are new too: strategies that take cache
riders may send some along; ``relay``; or ``adaptive``, the cheaper of the two by the cache
shadow's prediction); then sent to a backend, which answers with what it served (``Served``);
the ordering observes the outcome under the layout's keys. Backends: the token-level radix
simulator, or the embedded engine.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from appliance.bench.ordering.radix import RadixLRU
from appliance.bench.ordering.workload import Turn, Workload
from rag.layout import ADAPTIVE, APPEND, Conversation
from rag.layout_choice import lay_out
from rag.ordering import ContextOrdering
from rag.prompt_keys import answer_key
from rag.types import RetrievedChunk

Messages = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Served:
    """What a backend did with one request."""

    prompt_tokens: int
    cached_tokens: int
    ttft_s: float = 0.0
    # tokens of the answer the backend holds in its cache after the prompt (an engine caches
    # what it generated; 0 when the replayed answer was never generated there)
    answer_tokens: int = 0
    worker: str = ""  # the worker that served it, behind a gateway


# (messages of the request, the answer to append to the conversation) -> what was served
Backend = Callable[[Messages, str], Served]


RIDERS = "prefix+rider"  # the label of ``prefix`` with cache riders
RELAY_ROW = "re-lay"  # ``prefix`` with cache riders, every follow-up re-laid
ADAPTIVE_ROW = "adaptive"  # ``prefix`` with cache riders, each turn's layout chosen


@dataclass(frozen=True)
class Variant:
    """One row of the benchmark: a strategy, at most how many cache riders it may take per
    turn (None: as many candidates as a turn has; strategies without riders ignore them), and
    the prompt layout (``rag.layout.LAYOUTS``; None: append)."""

    label: str
    strategy: str
    riders: int | None = None
    layout: str | None = None

    @classmethod
    def of(cls, item: str | Variant) -> Variant:
        return item if isinstance(item, Variant) else cls(item, item)


@dataclass
class Outcome:
    prompt_tokens: int = 0
    cached_tokens: int = 0
    ttfts: list[float] = field(default_factory=list)
    first_turn: list[bool] = field(default_factory=list)  # per request: a session's first turn
    prefills: list[int] = field(default_factory=list)  # per request: tokens not from the cache
    requests: int = 0
    riders: int = 0  # cache riders sent (candidate chunks beyond the top-k)
    layouts: Counter[str] = field(default_factory=Counter)  # layouts sent, by kind
    predicted: int = 0  # cached tokens the shadow predicted for the layouts sent
    # appended follow-ups: their prefill, and their floor (the tokens of the user message they
    # add: nothing after a conversation's own history can be cached, whatever the order; only
    # counted when the replay has a token count)
    appended_prefill: int = 0
    appended_floor: int = 0

    @property
    def prefill_tokens(self) -> int:
        return self.prompt_tokens - self.cached_tokens

    @property
    def first_turn_prefill(self) -> int:
        """Prefill of first turns: the only documents that can be shared across conversations."""
        return sum(p for p, first in zip(self.prefills, self.first_turn, strict=True) if first)

    def ttfts_of(self, first: bool) -> list[float]:
        """TTFTs of first turns (``first``) or of follow-ups."""
        return [t for t, f in zip(self.ttfts, self.first_turn, strict=True) if f == first]

    @property
    def hit_ratio(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


class Replayer:
    """One strategy's side of a replay: its conversations so far, and the outcome."""

    def __init__(
        self,
        workload: Workload,
        ordering: ContextOrdering,
        strategy: str,
        backend: Backend,
        riders: int | None = None,
        page_tokens: int = 1,
        layout: str | None = None,
        count: Callable[[Messages], int] | None = None,
    ) -> None:
        """``riders``: at most this many cache riders per turn (None: as many candidates as a
        turn has; 0: none). ``page_tokens``: the backend's cache granularity (told to the
        ordering with each report, as the chat service does). ``layout``: how turns are laid
        out (``rag.layout.LAYOUTS``; None: appended); ``adaptive`` counts each candidate's
        prompt tokens with ``count``; with ``count``, every row also counts the floor of its
        appended follow-ups (``Outcome.appended_floor``)."""
        self.system = workload.system_prompt
        self.ordering, self.strategy, self.backend = ordering, strategy, backend
        self.riders = riders
        self.page_tokens = page_tokens
        self.layout = layout or APPEND
        if self.layout == ADAPTIVE and count is None:
            raise ValueError("the adaptive layout needs a prompt token count")
        # one layout has nothing to choose between: its prompt tokens are not needed
        self.counts = count is not None
        self.count = count or (lambda messages: 0)
        self.conversations: dict[int, Conversation] = {}
        self.outcome = Outcome()
        # turns of different sessions may be played from several threads at once
        self._lock = threading.Lock()

    def play(self, turn: Turn) -> None:
        """One turn of its session, laid out by ``rag.layout``, served and observed."""
        with self._lock:
            conv = self.conversations.setdefault(turn.session, Conversation.start(self.system))

        def order(
            chunks: Sequence[RetrievedChunk],
            prefix: Sequence[Hashable],
            candidates: Sequence[RetrievedChunk],
            tally: bool,
        ) -> list[RetrievedChunk]:
            return self.ordering.order(
                self.strategy, chunks, prefix, candidates, self.riders, tally=tally
            )

        count = self.count
        layout, scored = lay_out(
            self.layout,
            conv,
            turn.question,
            turn.retrieved,
            order,
            lambda candidate: count(candidate.messages),
            lambda candidate: self.ordering.predicted_cached(candidate.keys),
            turn.candidates,
        )
        floor = 0
        if self.counts and layout.kind == APPEND and conv.sent:
            # what the follow-up adds after its conversation's last prompt and answer
            floor = count(layout.messages) - count(conv.sent)
        served = self.backend(layout.messages, turn.answer)
        self.ordering.observe(
            layout.prefix,
            layout.chunk_keys,
            served.prompt_tokens,
            served.cached_tokens,
            self.page_tokens,
            tail=layout.tail,
            # an answer the backend never generated is not in its cache: not to be followed
            answer=answer_key(turn.answer) if served.answer_tokens else None,
            completion_tokens=served.answer_tokens + 1,
            worker=served.worker,
            after=layout.after,
        )
        conv.record(layout, turn.answer)
        with self._lock:
            self._count(turn, served, sum(c.rider for c in layout.citations), floor)
            self.outcome.layouts[layout.kind] += 1
            self.outcome.predicted += scored[layout.kind][1]

    def _count(self, turn: Turn, served: Served, riders: int, floor: int = 0) -> None:
        out = self.outcome
        out.prompt_tokens += served.prompt_tokens
        out.cached_tokens += served.cached_tokens
        out.ttfts.append(served.ttft_s)
        out.prefills.append(served.prompt_tokens - served.cached_tokens)
        out.first_turn.append(turn.turn == 0)
        if floor:
            out.appended_prefill += served.prompt_tokens - served.cached_tokens
            out.appended_floor += floor
        out.requests += 1
        out.riders += riders


def replay(
    workload: Workload,
    turns: Sequence[Turn],
    ordering: ContextOrdering,
    strategy: str,
    backend: Backend,
    riders: int | None = None,
    page_tokens: int = 1,
    layout: str | None = None,
    count: Callable[[Messages], int] | None = None,
) -> Outcome:
    """Play ``turns`` in order through one strategy and backend (and layout)."""
    player = Replayer(workload, ordering, strategy, backend, riders, page_tokens, layout, count)
    for turn in turns:
        player.play(turn)
    return player.outcome


class PieceTokenizer:
    """Token ids of a chat, built from memoised pieces (each message split at blank lines), so
    equal text always gives equal ids and a long replay tokenises each piece once."""

    def __init__(self, encode: Callable[[str], list[int]]) -> None:
        self._encode = encode
        self._memo: dict[str, tuple[int, ...]] = {}

    def piece(self, text: str) -> tuple[int, ...]:
        ids = self._memo.get(text)
        if ids is None:
            ids = self._memo[text] = tuple(self._encode(text))
        return ids

    def message(self, role: str, text: str) -> list[int]:
        ids = list(self.piece(f"<|im_start|>{role}\n"))
        for i, part in enumerate(text.split("\n\n")):
            if i:
                ids += self.piece("\n\n")
            ids += self.piece(part)
        ids += self.piece("<|im_end|>\n")
        return ids

    def chat(self, messages: Messages) -> list[int]:
        ids: list[int] = []
        for role, text in messages:
            ids += self.message(role, text)
        return ids + list(self.piece("<|im_start|>assistant\n"))


def simulator_backend(cache: RadixLRU, tokens: PieceTokenizer) -> Backend:
    """The radix simulator as a backend: match like the engine (all but the last prompt token),
    then cache the prompt and the answer, as the engine does when a request finishes."""

    def serve(messages: Messages, answer: str) -> Served:
        ids = tokens.chat(messages)
        cached = cache.match(ids[:-1])
        generated = tokens.piece(answer)
        cache.insert(ids + list(generated))
        return Served(len(ids), cached, 0.0, len(generated))

    return serve
