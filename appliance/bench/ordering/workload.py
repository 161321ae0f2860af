"""The ordering benchmark's workload: multi-session RAG chat shaped like a real deployment.

Deterministic from a seed:
- a shared system prompt of about ``system_words`` words (tools and policies);
- ``topics`` topics of ``chunks_per_topic`` chunks each; sessions pick their topic by Zipf
  popularity, and inside a topic some chunks are retrieved far more often than others;
- each session has 1-5 turns; a follow-up stays on topic (or drifts, with ``drift``) and
  retrieves ``top_k`` chunks, the most relevant first (a share of them from other topics);
- beyond the top-k, the retriever's next ``candidates`` ranks (default ``top_k``): more chunks
  of the topic by the same popularity, drawn without replacement after the top-k, with the
  same share from other topics. They are drawn from a random stream of their own, so the
  top-k lists (and everything else) are the same whatever ``candidates`` is;
- sessions arrive over time and their turns interleave (think time between turns).
Retrieval is simulated (no index): the point is the chunk sets' overlap, not their text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from rag.types import RetrievedChunk

POLICY_TOPICS = (
    "privacy",
    "security",
    "escalation",
    "tone",
    "citations",
    "refusals",
    "tools",
    "languages",
)


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


def _words(rng: np.random.Generator, vocab: np.ndarray, n: int) -> str:
    return " ".join(vocab[rng.integers(0, len(vocab), size=n)])


def _zipf(n: int, s: float) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1) ** s
    return w / w.sum()


def system_prompt(rng: np.random.Generator, vocab: np.ndarray, words: int) -> str:
    """Tools and policies, rendered identically on every request."""
    lines = ["You are the company's internal assistant. Follow these policies and tools."]
    i = 0
    while sum(len(line.split()) for line in lines) < words:
        topic = POLICY_TOPICS[i % len(POLICY_TOPICS)]
        lines.append(f"Policy {i + 1} ({topic}): {_words(rng, vocab, 30)}.")
        if i % 3 == 2:
            lines.append(
                f'Tool {{"name": "{topic}_lookup_{i}", "description": "{_words(rng, vocab, 12)}", '
                f'"parameters": {{"query": "string", "limit": "integer"}}}}'
            )
        i += 1
    lines.append("Answer only from the numbered documents and cite them as [1], [2].")
    return "\n".join(lines)


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
    seed: int = 0,
    count_tokens: Callable[[str], int] | None = None,
) -> Workload:
    rng = np.random.default_rng(seed)
    extra_rng = np.random.default_rng([seed, 1])  # candidates only: leaves ``rng`` untouched
    n_candidates = top_k if candidates is None else candidates
    vocab = np.array(
        [
            "".join(rng.choice(list("abcdefghiklmnoprstuvy"), size=rng.integers(3, 9)))
            for _ in range(3000)
        ]
    )
    system = system_prompt(rng, vocab, system_words)
    chunks: list[RetrievedChunk] = []
    for t in range(topics):
        for j in range(chunks_per_topic):
            chunks.append(
                RetrievedChunk(
                    chunk_id=t * chunks_per_topic + j + 1,
                    document_id=t + 1,
                    title=f"Handbook {t + 1}",
                    section=f"Part {j + 1}",
                    page=None,
                    text=_words(rng, vocab, chunk_words),
                    source=f"handbook-{t + 1}.md",
                    score=0.0,
                )
            )
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
    intent_p = _zipf(intents, 1.0) if intents else None

    def more(topic: int, own: list[int], picked: list[RetrievedChunk]) -> list[RetrievedChunk]:
        """Ranks top_k+1..: the topic's other chunks by popularity, a share from other topics
        (the same draw as the top-k's, continued, on the candidates' own random stream)."""
        base = topic * chunks_per_topic
        rest = np.array(
            [j for j in range(chunks_per_topic) if j not in own and chunks[base + j] not in picked]
        )
        n = min(n_candidates, len(rest))
        if not n:
            return []
        p = chunk_p[rest] / chunk_p[rest].sum()
        drawn = extra_rng.choice(rest, size=n, replace=False, p=p)
        out = [chunks[base + int(j)] for j in drawn]
        for i in range(n):
            if extra_rng.random() < foreign_share:
                other = int(topic_order[extra_rng.choice(topics, p=topic_p)])
                cand = chunks[
                    other * chunks_per_topic + int(extra_rng.choice(chunks_per_topic, p=chunk_p))
                ]
                if cand not in picked and cand not in out:
                    out[i] = cand
        return out

    def retrieve(topic: int) -> tuple[tuple[RetrievedChunk, ...], tuple[RetrievedChunk, ...]]:
        if intents:  # a paraphrase of a recurring question: its list, lightly perturbed
            own = list(bases[topic][int(rng.choice(intents, p=intent_p))])
            if rng.random() < paraphrase_noise:
                j = int(rng.choice(chunks_per_topic, p=chunk_p))
                if j not in own:
                    own[int(rng.integers(1, top_k))] = j
            if rng.random() < paraphrase_noise:
                i = int(rng.integers(0, top_k - 1))
                own[i], own[i + 1] = own[i + 1], own[i]
        else:
            own = list(rng.choice(chunks_per_topic, size=top_k, replace=False, p=chunk_p))
        picked = [chunks[topic * chunks_per_topic + int(j)] for j in own]
        for i in range(1, top_k):  # a share of the hits comes from other topics
            if rng.random() < foreign_share:
                other = int(topic_order[rng.choice(topics, p=topic_p)])
                cand = chunks[
                    other * chunks_per_topic + int(rng.choice(chunks_per_topic, p=chunk_p))
                ]
                if cand not in picked:
                    picked[i] = cand
        ranked = [*picked, *more(topic, [int(j) for j in own], picked)]
        scored = [replace(c, score=round(1.0 - 0.1 * r, 3)) for r, c in enumerate(ranked)]
        return tuple(scored[:top_k]), tuple(scored[top_k:])

    timed: list[tuple[float, Turn]] = []
    for s in range(sessions):
        start = s * 1.0 + rng.random()
        topic = int(topic_order[rng.choice(topics, p=topic_p)])
        clock = start
        for turn in range(int(rng.integers(1, 6))):
            if turn and rng.random() < drift:
                topic = int(topic_order[rng.choice(topics, p=topic_p)])
            question = f"Question about handbook {topic + 1}: {_words(rng, vocab, 10)}?"
            answer = f"{_words(rng, vocab, answer_words)} [1]."
            retrieved, ranked_more = retrieve(topic)
            timed.append((clock, Turn(s, turn, question, retrieved, answer, ranked_more)))
            clock += 2.0 + 6.0 * rng.random()  # think time: sessions interleave
    timed.sort(key=lambda x: x[0])
    return Workload(system, tuple(chunks), tuple(t for _, t in timed))
