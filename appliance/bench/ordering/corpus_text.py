"""The ordering benchmark's corpus text (pure, deterministic from a random generator): a
vocabulary of made-up words, the system prompt of tools and policies, and the handbook chunks,
topic by topic. Only the chunk sets' overlap matters to the benchmark, not what they say."""

from __future__ import annotations

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


def words(rng: np.random.Generator, vocab: np.ndarray, n: int) -> str:
    """``n`` words drawn from ``vocab``."""
    return " ".join(vocab[rng.integers(0, len(vocab), size=n)])


def system_prompt(rng: np.random.Generator, vocab: np.ndarray, length: int) -> str:
    """Tools and policies of about ``length`` words, rendered identically on every request."""
    lines = ["You are the company's internal assistant. Follow these policies and tools."]
    i = 0
    while sum(len(line.split()) for line in lines) < length:
        topic = POLICY_TOPICS[i % len(POLICY_TOPICS)]
        lines.append(f"Policy {i + 1} ({topic}): {words(rng, vocab, 30)}.")
        if i % 3 == 2:
            lines.append(
                f'Tool {{"name": "{topic}_lookup_{i}", "description": "{words(rng, vocab, 12)}", '
                f'"parameters": {{"query": "string", "limit": "integer"}}}}'
            )
        i += 1
    lines.append("Answer only from the numbered documents and cite them as [1], [2].")
    return "\n".join(lines)


def vocabulary(rng: np.random.Generator) -> np.ndarray:
    """3,000 made-up words."""
    return np.array(
        [
            "".join(rng.choice(list("abcdefghiklmnoprstuvy"), size=rng.integers(3, 9)))
            for _ in range(3000)
        ]
    )


def handbook(
    rng: np.random.Generator, vocab: np.ndarray, topics: int, chunks_per_topic: int, length: int
) -> list[RetrievedChunk]:
    """``chunks_per_topic`` chunks of ``length`` words for each topic, topic by topic."""
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
                    text=words(rng, vocab, length),
                    source=f"handbook-{t + 1}.md",
                    score=0.0,
                )
            )
    return chunks
