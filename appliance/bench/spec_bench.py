"""``appliance bench engine --speculative``: prompt-lookup speculative decoding on vs off, side by
side in one run, plus the decode step's memory bandwidth against the machine's measured limit.

One embedded engine runs every prompt twice, with speculation off and with the given config
(``EmbeddedEngine.set_speculative``), alternating which goes first (the machine's noise is
shared). One engine, not two side by side: two engines' OpenMP teams are more threads than
CPUs, and libgomp then stops letting idle workers spin, which made every step slower and
inflated speculation's gain (fewer steps) from 1.23x to 1.44x on the dev row. Workloads:
- RAG, grounded: each English question of the sample corpus's ``qa.json`` after its gold
  document's text around the gold phrase (two numbered documents, the appliance's system
  prompt), greedy with the grounded row's repetition penalty: answers copy from the documents;
  the same for ``qa_heldout.json``, questions no speculation setting was chosen on;
- the held-out questions again, drafting from each request's own history only (no pool of
  earlier answers): what the pool adds, side by side;
- the dev prompts, 8 at a time (speculation under continuous batching);
- open-ended prompts that copy little (poems, stories), one at a time and 8 at a time;
- the held-out questions asked again, the pool holding each one's earlier answer (a question
  staff ask again and again).
The engine's pool of earlier answers (``draft_pool.py``) is filled by the bench, not by the
engine (``Answers``): a row drafts from every answer seen before except those to its own
prompts, and a prompt's answer joins the pool only once both its sides ran.
Decode tokens/s is completion tokens after the first over the time after the first token,
summed over the requests. The acceptance rate is accepted drafts over drafted tokens.
Ceiling: the tokens a step no drafter looking up the request's own history with these n-gram
sizes and draft length can beat on the speculation-off answers (every earlier occurrence tried,
for free: ``spec_ceiling.py``); drafts from the pool of earlier answers can pass it.
Bandwidth: 8 distinct short prompts decoding together (the 8-distinct column of ``appliance
bench engine``), spec off: bytes one decode step must read (weights plus each row's KV, once)
times steps per second, as a share of a 1 GiB streaming read on the same threads.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from appliance.bench.spec_bandwidth import measured_read_limit, step_bytes
from appliance.bench.spec_ceiling import lookup_ceiling
from appliance.bench.table import render, yes
from appliance.core.config import SAMPLE_CORPUS, ChatConfig
from engine.base import Finished, GenerateRequest, SamplingParams, TextDelta
from engine.embedded.engine import EmbeddedEngine
from engine.embedded.ngram_draft import DraftConfig
from engine.embedded.speculative import OFF, SpeculativeConfig

SPEEDUP_TARGET = 1.5
OPEN_ENDED = (
    "Write a short poem about the sea at night.",
    "Tell a short story about a robot who learns to paint.",
    "Describe your ideal weekend in a few sentences.",
    "Explain why the sky is blue to a child.",
    "Write a letter to a friend about a trip to the mountains.",
    "List some ideas for a birthday party.",
    "What makes a good team leader?",
    "Describe a busy market in the morning.",
)


@dataclass
class Run:
    text: str
    tokens: int  # completion tokens
    decode_s: float  # after the first token
    drafted: int
    accepted: int
    prompt_ids: list[int]
    answer_ids: list[int]  # the answer re-tokenised (the lookup ceiling's input)


def rag_prompts(limit: int, questions: str = "qa.json") -> list[tuple[tuple[str, str], ...]]:
    """Grounded RAG prompts for the English questions of the sample corpus's ``questions``."""
    items = json.loads((SAMPLE_CORPUS / questions).read_text(encoding="utf-8"))
    system = ChatConfig().system_prompt
    out = []
    for item in items:
        if item["gold_file"].endswith("-ko.md") or not item["question"].isascii():
            continue
        text = (SAMPLE_CORPUS / item["gold_file"]).read_text(encoding="utf-8")
        at = max(0, text.find(item["gold_phrase"]))
        start = max(0, at - 1200)
        window = text[start : start + 2400]
        half = window.rfind("\n", 0, 1200) + 1 or 1200
        name = item["gold_file"]
        docs = f"[1] {name}\n{window[:half]}\n\n[2] {name}\n{window[half:]}"
        user = f"Documents:\n\n{docs}\n\nMost relevant documents: [1], [2]\n\nQuestion: "
        out.append((("system", system), ("user", user + item["question"])))
        if len(out) == limit:
            break
    return out


def run_prompt(engine: EmbeddedEngine, messages, sampling: SamplingParams) -> Run:  # noqa: ANN001
    """``messages`` answered once by ``engine``: the text, its timings and draft counts, the
    prompt's ids and the answer re-tokenised."""
    text, final = "", None
    for item in engine.generate(GenerateRequest(messages=messages, sampling=sampling)):
        if isinstance(item, TextDelta):
            text += item.text
        elif isinstance(item, Finished):
            final = item.stats
    assert final is not None
    return Run(
        text,
        final.completion_tokens,
        max(0.0, final.e2e_s - final.ttft_s),
        getattr(final, "spec_draft_tokens", 0),
        getattr(final, "spec_accepted_tokens", 0),
        engine.encode(engine.render_chat(messages)),
        engine.encode(text),
    )


def _batch(engine: EmbeddedEngine, prompts: list, sampling: SamplingParams) -> list[Run]:
    out: list[Run | None] = [None] * len(prompts)

    def one(i: int) -> None:
        out[i] = run_prompt(engine, prompts[i], sampling)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for r in out if r is not None]


@dataclass
class Side:
    runs: list[Run]

    @property
    def tps(self) -> float:
        tokens = sum(max(0, r.tokens - 1) for r in self.runs)
        return tokens / max(1e-9, sum(r.decode_s for r in self.runs))

    @property
    def per_step(self) -> float:
        """Tokens per decode step (a verify step emits its accepted drafts plus one): what
        speculation saves in forward passes, whatever the machine's load."""
        tokens = sum(max(0, r.tokens - 1) for r in self.runs)
        steps = tokens - sum(r.accepted for r in self.runs)
        return tokens / steps if steps else 1.0

    def ceiling(self, draft: DraftConfig) -> float:
        """Tokens a decode step that any prompt-lookup drafter of ``draft``'s sizes could
        reach on these answers (``spec_ceiling.py``); the first token, from the prompt's
        step, is history."""
        tokens = steps = 0
        for r in self.runs:
            head, rest = r.answer_ids[:1], r.answer_ids[1:]
            t, s = lookup_ceiling(r.prompt_ids + head, rest, draft.max_tokens, draft.max_ngram)
            tokens, steps = tokens + t, steps + s
        return tokens / steps if steps else 1.0

    @property
    def acceptance(self) -> float:
        drafted = sum(r.drafted for r in self.runs)
        return sum(r.accepted for r in self.runs) / drafted if drafted else 0.0


class Answers:
    """What the engine's draft pool holds during the bench. The pool learns nothing by itself
    here (``learning`` off): before each row it gets every answer the bench has seen *except*
    those to the row's own prompts (a colleague's earlier questions), and each prompt's answer
    once both sides of it ran, so no timed run drafts from its own answer. The "asked again"
    row is the exception, and says so: there the pool holds the question's earlier answer."""

    def __init__(self, engine: EmbeddedEngine) -> None:
        self.pool = engine.draft_pool
        self.pool.learning = False
        self.seen: dict[tuple, list[int]] = {}

    def prepare(self, prompts: list, own: bool = False) -> None:
        self.pool.clear()
        for key, ids in self.seen.items():
            if own or key not in prompts:
                self.pool.add(ids)

    def learn(self, prompts: list, runs: list[Run]) -> None:
        for key, run in zip(prompts, runs, strict=True):
            self.seen[key] = run.answer_ids
            self.pool.add(run.answer_ids)


def _compare(
    engine: EmbeddedEngine,
    spec: SpeculativeConfig,
    prompts: list,
    sampling: SamplingParams,
    width: int,
    answers: Answers,
    rounds: int = 1,
    again: bool = False,
) -> tuple[Side, Side]:
    """``prompts`` in groups of ``width``, each group with speculation off and with ``spec``,
    alternating which goes first, ``rounds`` times over; the prefix cache is flushed after
    each. (One group of 8 at once is a single sample: a second round, the other side first,
    cancels the drift of a shared box.) The draft pool: ``Answers``."""
    a: list[Run] = []
    b: list[Run] = []
    groups = [prompts[start : start + width] for start in range(0, len(prompts), width)]
    answers.prepare(prompts, own=again)
    for n, group in enumerate(groups * rounds):
        order = [(OFF, a), (spec, b)] if n % 2 == 0 else [(spec, b), (OFF, a)]
        for config, sink in order:
            engine.set_speculative(config)
            if width == 1:
                sink.append(run_prompt(engine, group[0], sampling))
            else:
                sink.extend(_batch(engine, group, sampling))
            engine.flush_cache()
        if n >= len(groups) * (rounds - 1) and not again:  # the group's last round
            answers.learn(group, a[-len(group) :])
    return Side(a), Side(b)


def _bandwidth(off: EmbeddedEngine, new: int) -> tuple[float, float, float]:
    """(achieved bytes/s, limit bytes/s, decode tokens/s of the batch) of 8 distinct short
    prompts."""
    prompts = [(("user", q),) for q in OPEN_ENDED]
    sampling = SamplingParams(new, ignore_eos=True)
    side = Side(_batch(off, prompts, sampling))
    prompt_len = sum(len(off.encode(off.render_chat(p))) for p in prompts) / len(prompts)
    mean_len = int(prompt_len + new / 2)
    # ``tps`` sums tokens over the streams' summed decode times: one stream's rate, which is
    # the batch's steps per second (every step gives each stream one token)
    steps_per_s = side.tps
    achieved = step_bytes(off, [mean_len] * len(prompts)) * steps_per_s
    return achieved, measured_read_limit(), side.tps * len(prompts)


def run_spec_bench(
    model_dir: Path,
    spec: SpeculativeConfig | None = None,
    quick: bool = False,
    dtype: str = "auto",
) -> str:
    spec = spec or SpeculativeConfig(mode="ngram")
    limit, new = (3, 32) if quick else (8, 96)
    engine = EmbeddedEngine(model_dir, dtype=dtype, max_running=8, speculative=spec)
    try:
        rag = rag_prompts(limit)
        held_out = rag_prompts(limit, "qa_heldout.json")
        grounded = SamplingParams(new, repetition_penalty=ChatConfig().repetition_penalty)
        plain = SamplingParams(new)
        run_prompt(engine, rag[0], SamplingParams(4))  # warm up
        # every run starts cold: a cached prompt's last token is computed in a 1-row step,
        # whose GEMM rounds differently from the whole prompt's, so greedy text may differ
        engine.flush_cache()
        chat = [(("user", q),) for q in OPEN_ENDED[:limit]]
        answers = Answers(engine)
        own_only = replace(spec, pool_tokens=0)
        results = [
            (
                f"RAG grounded, 1 stream ({len(rag)} questions)",
                *_compare(engine, spec, rag, grounded, 1, answers),
            ),
            (
                f"RAG grounded, 1 stream, held out ({len(held_out)} questions)",
                *_compare(engine, spec, held_out, grounded, 1, answers),
            ),
            (
                "  the same, drafts from each request's own history only",
                *_compare(engine, own_only, held_out, grounded, 1, answers),
            ),
            (
                f"RAG grounded, {min(8, len(rag))} at once, 2 rounds",
                *_compare(engine, spec, rag, grounded, 8, answers, rounds=2),
            ),
            ("open-ended, 1 stream", *_compare(engine, spec, chat, plain, 1, answers)),
            (
                f"open-ended, {len(chat)} at once, 2 rounds",
                *_compare(engine, spec, chat, plain, 8, answers, rounds=2),
            ),
            (
                "held out, asked again (the pool holds each one's earlier answer)",
                *_compare(engine, spec, held_out, grounded, 1, answers, again=True),
            ),
        ]
        engine.set_speculative(OFF)
        achieved, limit_bps, tps8 = _bandwidth(engine, new)
    finally:
        engine.close()
    rows = []
    for label, a, b in results:
        same = sum(x.text == y.text for x, y in zip(a.runs, b.runs, strict=True))
        ratio = b.tps / a.tps if a.tps else 0.0
        target = f">= {SPEEDUP_TARGET}x" if label.startswith("RAG") else "-"
        met = yes(ratio >= SPEEDUP_TARGET) if label.startswith("RAG") else ""
        rows.append(
            (
                label,
                f"{a.tps:.1f}",
                f"{b.tps:.1f}",
                f"{ratio:.2f}x",
                f"{b.acceptance:.2f}",
                f"{b.per_step:.2f}",
                f"{a.ceiling(spec.draft):.2f}",
                f"{same}/{len(a.runs)}",
                target,
                met,
            )
        )
    headers = (
        "workload", "off tok/s", "on tok/s", "on/off", "acceptance", "tok/step", "ceiling",
        "same text", "target", "met",
    )  # fmt: skip
    gb = 1e9
    bandwidth = (
        f"8 distinct streams, spec off: {tps8:.1f} decode tok/s in all; a step reads weights + "
        f"KV once: {achieved / gb:.2f} GB/s achieved of {limit_bps / gb:.2f} GB/s measured "
        f"(1 GiB sum) = {achieved / limit_bps:.0%}"
    )
    draft = spec.draft
    load = os.getloadavg()[0]
    note = (
        f"load average {load:.1f} on {os.cpu_count()} CPUs; "
        f"model {model_dir.name}, dtype {engine.info().dtype}, {engine.runtime}; drafts: up to "
        f"{draft.max_tokens} tokens, n-grams {draft.max_ngram}..{draft.min_ngram}, at most "
        f"{spec.max_step_drafts} per step; {new} new tokens; greedy"
    )
    return render(headers, rows) + "\n" + bandwidth + "\n" + note
