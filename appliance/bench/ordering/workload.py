"""The ordering benchmark's workload: multi-session RAG chat shaped like a real deployment.

Deterministic from a seed:
- a shared system prompt of about ``system_words`` words (tools and policies);
- ``topics`` topics of ``chunks_per_topic`` chunks each; sessions pick their topic by Zipf
  popularity, and inside a topic some chunks are retrieved far more often than others;
- each session has 1-``max_turns`` turns (or one, but for a ``multi_turn_share`` of them);
  a follow-up stays on topic (or drifts, with ``drift``) and retrieves ``top_k`` chunks, the
  most relevant first (a share of them from other topics);
- beyond the top-k, the retriever's next ``candidates`` ranks (default ``top_k``): more chunks
  of the topic by the same popularity, drawn without replacement after the top-k, with the
  same share from other topics. They are drawn from a random stream of their own, so the
  top-k lists (and everything else) are the same whatever ``candidates`` is;
- questions of ``question_words`` words (a longer question is a longer prompt tail);
- sessions arrive over time and their turns interleave (think time between turns).
Retrieval is simulated (no index): the point is the chunk sets' overlap, not their text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from appliance.bench.ordering.corpus_text import handbook, system_prompt, vocabulary, words
from rag.types import RetrievedChunk


@dataclass(frozen=True)
class Turn:
    session: int
    turn: int
    question: str
    retrieved: tuple[RetrievedChunk, ...]  # most relevant first
    answer: str  # what the model "said": replayed into the next turn's history
    candidates: tuple[RetrievedChunk, ...] = ()  # ranks top_k+1.. (cache-rider candidates)


@dataclass(frozen=True)
class Workload:
    system_prompt: str
    chunks: tuple[RetrievedChunk, ...]
    turns: tuple[Turn, ...]  # in arrival order, sessions interleaved

    def sessions(self) -> int:
        return len({t.session for t in self.turns})


def _zipf(n: int, s: float) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1) ** s
    return w / w.sum()


@dataclass(frozen=True)
class _Retriever:
    """Simulated retrieval: ranked chunk lists by topic and chunk popularity, a share from
    other topics; the candidates beyond the top-k are drawn on ``extra_rng`` only."""

    rng: np.random.Generator
    extra_rng: np.random.Generator
    chunks: list[RetrievedChunk]
    topics: int
    chunks_per_topic: int
    top_k: int
    n_candidates: int
    foreign_share: float
    intents: int
    paraphrase_noise: float
    topic_p: np.ndarray
    topic_order: np.ndarray  # popularity rank -> topic
    chunk_p: np.ndarray
    bases: list[list[np.ndarray]]  # per topic, the ranked lists of its recurring questions
    intent_p: np.ndarray | None

    def topic(self, rng: np.random.Generator) -> int:
        """A topic by popularity."""
        return int(self.topic_order[rng.choice(self.topics, p=self.topic_p)])

    def foreign(self, rng: np.random.Generator) -> RetrievedChunk:
        """A chunk of a topic drawn by popularity, itself drawn by popularity in that topic."""
        other = self.topic(rng)
        return self.chunks[
            other * self.chunks_per_topic + int(rng.choice(self.chunks_per_topic, p=self.chunk_p))
        ]

    def more(
        self, topic: int, own: list[int], picked: list[RetrievedChunk]
    ) -> list[RetrievedChunk]:
        """Ranks top_k+1..: the topic's other chunks by popularity, a share from other topics
        (the same draw as the top-k's, continued, on the candidates' own random stream)."""
        chunks, chunk_p, extra_rng = self.chunks, self.chunk_p, self.extra_rng
        base = topic * self.chunks_per_topic
        rest = np.array(
            [
                j
                for j in range(self.chunks_per_topic)
                if j not in own and chunks[base + j] not in picked
            ]
        )
        n = min(self.n_candidates, len(rest))
        if not n:
            return []
        p = chunk_p[rest] / chunk_p[rest].sum()
        drawn = extra_rng.choice(rest, size=n, replace=False, p=p)
        out = [chunks[base + int(j)] for j in drawn]
        for i in range(n):
            if extra_rng.random() < self.foreign_share:
                cand = self.foreign(extra_rng)
                if cand not in picked and cand not in out:
                    out[i] = cand
        return out

    def _own(self, topic: int) -> list:
        """The topic's chunk indexes for one question, the most relevant first."""
        rng, top_k = self.rng, self.top_k
        if not self.intents:
            return list(
                rng.choice(self.chunks_per_topic, size=top_k, replace=False, p=self.chunk_p)
            )
        # a paraphrase of a recurring question: its list, lightly perturbed
        own = list(self.bases[topic][int(rng.choice(self.intents, p=self.intent_p))])
        if rng.random() < self.paraphrase_noise:
            j = int(rng.choice(self.chunks_per_topic, p=self.chunk_p))
            if j not in own:
                own[int(rng.integers(1, top_k))] = j
        if rng.random() < self.paraphrase_noise:
            i = int(rng.integers(0, top_k - 1))
            own[i], own[i + 1] = own[i + 1], own[i]
        return own

    def retrieve(self, topic: int) -> tuple[tuple[RetrievedChunk, ...], tuple[RetrievedChunk, ...]]:
        """The top-k, most relevant first, and the candidates ranked after them."""
        own = self._own(topic)
        picked = [self.chunks[topic * self.chunks_per_topic + int(j)] for j in own]
        for i in range(1, self.top_k):  # a share of the hits comes from other topics
            if self.rng.random() < self.foreign_share:
                cand = self.foreign(self.rng)
                if cand not in picked:
                    picked[i] = cand
        ranked = [*picked, *self.more(topic, [int(j) for j in own], picked)]
        scored = [replace(c, score=round(1.0 - 0.1 * r, 3)) for r, c in enumerate(ranked)]
        return tuple(scored[: self.top_k]), tuple(scored[self.top_k :])


def _arrivals(
    rng: np.random.Generator,
    vocab: np.ndarray,
    retriever: _Retriever,
    sessions: int,
    drift: float,
    answer_words: int,
    max_turns: int = 5,
    multi_turn_share: float | None = None,
    question_words: int = 10,
) -> tuple[Turn, ...]:
    """Every session's turns, sessions arriving over time; in arrival order, interleaved.
    A session has 1..``max_turns`` turns, uniformly; with ``multi_turn_share``, it has one turn
    but for that share of sessions, which have 2..``max_turns`` (uniformly)."""
    timed: list[tuple[float, Turn]] = []
    for s in range(sessions):
        start = s * 1.0 + rng.random()
        topic = retriever.topic(rng)
        clock = start
        for turn in range(_turns(rng, max_turns, multi_turn_share)):
            if turn and rng.random() < drift:
                topic = retriever.topic(rng)
            question = f"Question about handbook {topic + 1}: {words(rng, vocab, question_words)}?"
            answer = f"{words(rng, vocab, answer_words)} [1]."
            retrieved, ranked_more = retriever.retrieve(topic)
            timed.append((clock, Turn(s, turn, question, retrieved, answer, ranked_more)))
            clock += 2.0 + 6.0 * rng.random()  # think time: sessions interleave
    timed.sort(key=lambda x: x[0])
    return tuple(t for _, t in timed)


def _turns(rng: np.random.Generator, max_turns: int, multi_turn_share: float | None) -> int:
    """How many turns a session has (see ``_arrivals``)."""
    if multi_turn_share is None:
        return int(rng.integers(1, max_turns + 1))
    if max_turns < 2 or rng.random() >= multi_turn_share:
        return 1
    return int(rng.integers(2, max_turns + 1))


def make_workload(
    sessions: int,
    *,
    topics: int = 60,
    chunks_per_topic: int = 10,
    chunk_words: int = 70,
    top_k: int = 4,
    topic_zipf: float = 1.1,
    chunk_zipf: float = 1.0,
    foreign_share: float = 0.15,
    drift: float = 0.15,
    system_words: int = 290,
    answer_words: int = 30,
    intents: int = 0,
    paraphrase_noise: float = 0.3,
    candidates: int | None = None,
    max_turns: int = 5,
    multi_turn_share: float | None = None,
    question_words: int = 10,
    seed: int = 0,
    count_tokens: Callable[[str], int] | None = None,
) -> Workload:
    rng = np.random.default_rng(seed)
    extra_rng = np.random.default_rng([seed, 1])  # candidates only: leaves ``rng`` untouched
    vocab = vocabulary(rng)
    system = system_prompt(rng, vocab, system_words)
    chunks = handbook(rng, vocab, topics, chunks_per_topic, chunk_words)
    if count_tokens is not None:
        chunks = [replace(c, token_count=count_tokens(c.text)) for c in chunks]
    topic_p = _zipf(topics, topic_zipf)
    topic_order = rng.permutation(topics)  # popularity rank -> topic
    chunk_p = _zipf(chunks_per_topic, chunk_zipf)
    # intents: per topic, the ranked lists that its recurring questions retrieve
    bases = [
        [rng.choice(chunks_per_topic, size=top_k, replace=False, p=chunk_p) for _ in range(intents)]
        for _ in range(topics)
    ]
    retriever = _Retriever(
        rng,
        extra_rng,
        chunks,
        topics,
        chunks_per_topic,
        top_k,
        top_k if candidates is None else candidates,
        foreign_share,
        intents,
        paraphrase_noise,
        topic_p,
        topic_order,
        chunk_p,
        bases,
        _zipf(intents, 1.0) if intents else None,
    )
    turns = _arrivals(
        rng,
        vocab,
        retriever,
        sessions,
        drift,
        answer_words,
        max_turns,
        multi_turn_share,
        question_words,
    )
    return Workload(system, tuple(chunks), turns)
