"""The ordering benchmark's real runs on the embedded engine: TTFT on a workload slice, and
answer quality on the sample corpus's QA set (citations that hit the gold chunk)."""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from appliance.bench.ordering_replay import Backend, Messages, Outcome, Replayer
from appliance.bench.ordering_workload import Turn, Workload
from appliance.config import AppConfig, BootstrapConfig, DatabaseConfig, PathsConfig
from engine.base import Engine, Finished, GenerateRequest, SamplingParams
from rag.ordering import ContextOrdering, default_ordering
from rag.prompt import build_messages, number_chunks, render_user_turn, segment_key
from rag.types import RetrievedChunk

QA_FILE = Path(__file__).resolve().parent.parent / "sample_corpus" / "qa.json"
CITATION = re.compile(r"\[(\d+)\]")


def _finish(engine: Engine, messages: Messages, new_tokens: int) -> tuple[Finished, str]:
    final, parts = None, []
    sampling = SamplingParams(max_new_tokens=new_tokens, temperature=0.0)
    for item in engine.generate(GenerateRequest(messages=messages, sampling=sampling)):
        if isinstance(item, Finished):
            final = item
        else:
            parts.append(item.text)
    assert final is not None
    return final, "".join(parts)


def engine_backend(engine: Engine) -> Backend:
    """One token per request: the run measures prefill (TTFT), not decoding."""

    def serve(messages: Messages, answer: str) -> tuple[int, int, float]:
        s = _finish(engine, messages, 1)[0].stats
        return s.prompt_tokens, s.cached_tokens, s.ttft_s

    return serve


def engine_run(
    engines: Mapping[str, Engine],
    workload: Workload,
    turns: Sequence[Turn],
    kv_capacity_tokens: int,
) -> dict[str, Outcome]:
    """Each strategy replays ``turns`` on its own engine (same model, same KV budget, empty
    cache), turn by turn in rotating order, so that every strategy meets the same machine load:
    TTFT on a shared CPU drifts a lot over minutes."""
    for engine in engines.values():
        _finish(engine, (("user", "warm up"),), 1)
        engine.flush_cache()
    time.sleep(0.5)  # each scheduler flushes on its next loop turn
    names = list(engines)
    players = {
        n: Replayer(workload, default_ordering(kv_capacity_tokens), n, engine_backend(engines[n]))
        for n in names
    }
    for i, turn in enumerate(turns):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            players[name].play(turn)
    return {n: p.outcome for n, p in players.items()}


@dataclass(frozen=True)
class Quality:
    hits: int  # answers whose [n] citations include the gold chunk
    grounded: int  # ... or, for answers without any citation, whose text comes from it
    retrieved: int  # questions whose gold chunk was retrieved at all (the ceiling)
    questions: int

    @property
    def grounded_score(self) -> float:
        return 100.0 * self.grounded / self.questions if self.questions else 0.0


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def _trigrams(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.lower())
    return set(zip(words, words[1:], words[2:], strict=False))


def attributed(answer: str, chunks: Mapping[int, str]) -> set[int]:
    """The chunks an answer cites implicitly: those sharing the most word trigrams with it."""
    grams = _trigrams(answer)
    overlap = {cid: len(grams & _trigrams(text)) for cid, text in chunks.items()}
    best = max(overlap.values(), default=0)
    return {cid for cid, n in overlap.items() if n == best} if best else set()


def qa_items(limit: int = 0) -> list[dict]:
    """The sample corpus's QA set: question, gold_file, gold_phrase."""
    items = json.loads(QA_FILE.read_text(encoding="utf-8"))
    return items[:limit] if limit else items


def sample_corpus_retrieval(
    config: AppConfig, engine: Engine, embedder: object, questions: Sequence[str]
) -> list[list[RetrievedChunk]]:
    """Top-k chunks per question from a fresh appliance holding only the sample corpus."""
    from appliance.app import build_appliance

    with tempfile.TemporaryDirectory() as tmp:
        qa_config = config.model_copy(
            update={
                "paths": PathsConfig(data_dir=Path(tmp)),
                "database": DatabaseConfig(),
                "bootstrap": BootstrapConfig(ingest_sample_corpus=True),
            }
        )
        app = build_appliance(qa_config, engine=engine, embedder=embedder)
        try:
            return [app.knowledge.retrieve(q, config.rag.top_k)[0] for q in questions]
        finally:
            app.db.dispose()


def qa_run(
    engine: Engine,
    items: Sequence[dict],
    retrieved: Sequence[Sequence[RetrievedChunk]],
    system_prompt: str,
    strategies: Sequence[str],
    kv_capacity_tokens: int,
    new_tokens: int = 48,
) -> dict[str, Quality]:
    """First turns laid out as the chat service does (system prompt, ordered documents,
    relevance hint, question); all questions of a strategy at once (the engine batches them)."""
    out: dict[str, Quality] = {}
    for name in strategies:
        ordering = default_ordering(kv_capacity_tokens)
        out[name] = _score(engine, ordering, name, system_prompt, items, retrieved, new_tokens)
    return out


def _score(
    engine: Engine,
    ordering: ContextOrdering,
    strategy: str,
    system: str,
    items: Sequence[dict],
    retrieved: Sequence[Sequence[RetrievedChunk]],
    new_tokens: int,
) -> Quality:
    prefix = (segment_key("system", system),)
    jobs = []
    for item, chunks in zip(items, retrieved, strict=True):
        gold = _norm(item["gold_phrase"])[:40]
        gold_ids = {c.chunk_id for c in chunks if gold in _norm(c.text)}
        ordered = ordering.order(strategy, chunks, prefix)
        new, citations = number_chunks(ordered, {}, relevance=chunks)
        messages = build_messages(system, [], render_user_turn(item["question"], new, citations))
        numbers = {c.number: c.chunk_id for c in citations}
        texts = {c.chunk_id: c.text for c in chunks}
        jobs.append((messages, numbers, gold_ids, [c.chunk_id for _n, c in new], texts))

    def ask(job: tuple) -> tuple[bool, bool]:
        messages, numbers, gold_ids, sent, texts = job
        final, answer = _finish(engine, messages, new_tokens)
        ordering.observe(prefix, sent, final.stats.prompt_tokens, final.stats.cached_tokens)
        cited = {numbers.get(int(n)) for n in CITATION.findall(answer)} - {None}
        hit = bool(cited & gold_ids)
        return hit, hit or (not cited and bool(attributed(answer, texts) & gold_ids))

    with ThreadPoolExecutor(max_workers=len(jobs) or 1) as pool:
        results = list(pool.map(ask, jobs))
    return Quality(
        sum(h for h, _g in results),
        sum(g for _h, g in results),
        sum(bool(j[2]) for j in jobs),
        len(jobs),
    )
