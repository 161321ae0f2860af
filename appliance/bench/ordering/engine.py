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

from appliance.bench.ordering.replay import (
    Backend,
    Messages,
    Outcome,
    Replayer,
    Served,
    Variant,
)
from appliance.bench.ordering.workload import Turn, Workload
from appliance.core.config import (
    SAMPLE_CORPUS,
    AppConfig,
    BootstrapConfig,
    DatabaseConfig,
    PathsConfig,
)
from engine.base import Engine, Finished, GenerateRequest, SamplingParams
from rag.ordering import ContextOrdering, default_ordering, riders_in
from rag.prompt import build_messages, number_chunks, render_user_turn
from rag.prompt_keys import answer_key, shadow_prefix, tail_key
from rag.types import RetrievedChunk

QA_FILE = SAMPLE_CORPUS / "qa.json"
CITATION = re.compile(r"\[(\d+)\]")


def _finish(
    engine: Engine, messages: Messages | None, new_tokens: int, prompt: str | None = None
) -> tuple[Finished, str]:
    final, parts = None, []
    sampling = SamplingParams(max_new_tokens=new_tokens, temperature=0.0)
    request = GenerateRequest(messages=messages, prompt=prompt, sampling=sampling)
    for item in engine.generate(request):
        if isinstance(item, Finished):
            final = item
        else:
            parts.append(item.text)
    assert final is not None
    return final, "".join(parts)


def engine_backend(engine: Engine) -> Backend:
    """One token per request: the run measures prefill (TTFT), not decoding. Then the engine is
    handed the workload's answer after the prompt (outside the measured request), so that it
    holds what it would hold had it generated that answer, as in a real chat."""

    def serve(messages: Messages, answer: str) -> Served:
        s = _finish(engine, messages, 1)[0].stats
        taught = _finish(engine, None, 1, prompt=engine.render_chat(messages) + answer)[0].stats
        return Served(
            s.prompt_tokens, s.cached_tokens, s.ttft_s, taught.prompt_tokens - s.prompt_tokens
        )

    return serve


def engine_run(
    engines: Mapping[str, Engine],
    workload: Workload,
    turns: Sequence[Turn],
    kv_capacity_tokens: int,
    variants: Sequence[Variant] = (),
) -> dict[str, Outcome]:
    """Each strategy replays ``turns`` on its own engine (same model, same KV budget, empty
    cache), turn by turn in rotating order, so that every strategy meets the same machine load:
    TTFT on a shared CPU drifts a lot over minutes. ``engines`` is keyed by strategy name or by
    the label of one of ``variants``."""
    for engine in engines.values():
        _finish(engine, (("user", "warm up"),), 1)
        engine.flush_cache()
    time.sleep(0.5)  # each scheduler flushes on its next loop turn
    names = list(engines)
    by_label = {v.label: v for v in variants}
    players = {}
    for n in names:
        v = by_label.get(n, Variant.of(n))
        ordering = default_ordering(kv_capacity_tokens)
        engine = engines[n]
        players[n] = Replayer(
            workload,
            ordering,
            v.strategy,
            engine_backend(engine),
            v.riders,
            layout=v.layout,
            count=lambda m, e=engine: e.count_tokens(e.render_chat(m)),
        )
    for i, turn in enumerate(turns):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            players[name].play(turn)
    return {n: p.outcome for n, p in players.items()}


@dataclass(frozen=True)
class Quality:
    hits: int  # answers whose [n] citations include the gold chunk
    grounded: int  # ... or, for answers without any citation, whose text comes from it
    retrieved: int  # questions whose gold chunk was in the prompt at all (the ceiling)
    questions: int
    riders: int = 0  # cache riders sent along, over all questions
    shared: bool = False  # measured on another row with the same first turns

    @property
    def grounded_score(self) -> float:
        return 100.0 * self.grounded / self.questions if self.questions else 0.0


# one question's retrieval with riders on: (required top-k, ranked candidates beyond it)
Retrieval = tuple[Sequence[RetrievedChunk], Sequence[RetrievedChunk]]


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
    config: AppConfig,
    engine: Engine,
    embedder: object,
    questions: Sequence[str],
    riders: int = 0,
) -> tuple[list[list[RetrievedChunk]], list[Retrieval]]:
    """Per question, from a fresh appliance holding only the sample corpus: the top-k chunks,
    and, as the chat service retrieves them with cache riders on, the same top-k with the next
    ``riders`` chunks of a top-``k + riders`` search as candidates."""
    from appliance.wiring.appliance import build_appliance

    k = config.rag.top_k
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
            plain = [app.knowledge.retrieve(q, k)[0] for q in questions]
            deep = [app.knowledge.retrieve(q, k + riders)[0] if riders else [] for q in questions]
        finally:
            app.db.dispose()
    out: list[Retrieval] = []
    for top, ranked in zip(plain, deep, strict=True):
        required = {c.chunk_id for c in top}
        out.append((top, [c for c in ranked if c.chunk_id not in required][:riders]))
    return plain, out


def qa_run(
    engine: Engine,
    items: Sequence[dict],
    retrieved: Sequence[Sequence[RetrievedChunk]],
    system_prompt: str,
    strategies: Sequence[str | Variant],
    kv_capacity_tokens: int,
    new_tokens: int = 48,
    with_riders: Sequence[Retrieval] | None = None,
    wave: int = 0,
) -> dict[str, Quality]:
    """First turns laid out as the chat service does (system prompt, ordered documents,
    relevance hint, question). Questions go in waves of ``wave`` (0: all at once; the engine
    batches a wave); each wave is ordered after the ones before it were observed, so that the
    cache shadow has something to follow. Variants that take cache riders get ``with_riders``
    (the chat service's retrieval with riders on); the others get ``retrieved``."""
    out: dict[str, Quality] = {}
    for item in strategies:
        v = Variant.of(item)
        lists: Sequence[Retrieval] = [(r, ()) for r in retrieved]
        if v.riders != 0 and with_riders is not None:
            lists = with_riders
        ordering = default_ordering(kv_capacity_tokens)
        out[v.label] = _score(engine, ordering, v, system_prompt, items, lists, new_tokens, wave)
    return out


def _score(
    engine: Engine,
    ordering: ContextOrdering,
    variant: Variant,
    system: str,
    items: Sequence[dict],
    lists: Sequence[Retrieval],
    new_tokens: int,
    wave: int,
) -> Quality:
    prefix = shadow_prefix(system, [])

    def prepare(item: dict, chunks: Sequence[RetrievedChunk], cands: Sequence[RetrievedChunk]):  # noqa: ANN202
        ordered = ordering.order(variant.strategy, chunks, prefix, cands, variant.riders)
        riders = riders_in(ordered, cands)
        new, citations = number_chunks(ordered, {}, relevance=chunks, riders=riders)
        user_turn = render_user_turn(item["question"], new, citations)
        messages = build_messages(system, [], user_turn)
        numbers = {c.number: c.chunk_id for c in citations}
        texts = {c.chunk_id: c.text for _n, c in new}
        gold = _norm(item["gold_phrase"])[:40]
        gold_ids = {cid for cid, text in texts.items() if gold in _norm(text)}
        sent = [c.chunk_id for _n, c in new]
        return messages, numbers, gold_ids, sent, texts, len(riders), user_turn

    def ask(job: tuple) -> tuple[bool, bool]:
        messages, numbers, gold_ids, sent, texts, _riders, user_turn = job
        final, answer = _finish(engine, messages, new_tokens)
        stats = final.stats
        ordering.observe(
            prefix,
            sent,
            stats.prompt_tokens,
            stats.cached_tokens,
            tail=tail_key(user_turn),
            answer=answer_key(answer),
            completion_tokens=stats.completion_tokens,
        )
        cited = {numbers.get(int(n)) for n in CITATION.findall(answer)} - {None}
        hit = bool(cited & gold_ids)
        return hit, hit or (not cited and bool(attributed(answer, texts) & gold_ids))

    pairs = list(zip(items, lists, strict=True))
    size = wave or len(pairs) or 1
    jobs, results = [], []
    for start in range(0, len(pairs), size):
        batch = [prepare(item, *chunks) for item, chunks in pairs[start : start + size]]
        with ThreadPoolExecutor(max_workers=len(batch)) as pool:
            results += list(pool.map(ask, batch))
        jobs += batch
    return Quality(
        sum(h for h, _g in results),
        sum(g for _h, g in results),
        sum(bool(j[2]) for j in jobs),
        len(jobs),
        sum(j[5] for j in jobs),
    )
