"""``appliance bench engine --draft-agreement``: how far drafts from outside the request's own
text could carry speculation, measured before any of them is built.

Prompt lookup (``ngram_draft.py``) can only propose what the request's history holds, and its
ceiling on the held-out RAG answers sits near 1.45 tokens a step (``spec_ceiling.py``), below
the 1.5x target whatever a step costs. A draft *model* has no such ceiling, and none smaller
than the engine's model ships in a package. One candidate is the model itself with its linear
weights quantized: fewer bytes a decode step (the step is bound by reading weights), the same
tokenizer, and mostly the same greedy choices.

This bench answers the question that decides whether to build it: how often such a draft
picks the model's own next token on the spec bench's grounded RAG answers (``rag_prompts``,
dev and held out). The engine answers each prompt greedily with speculation off; then the
model (float32, transformers) and each quantized copy score prompt and answer in one pass, and
at every answer position both apply the answer's repetition penalty (``penalize``) and take
their argmax. Tokens a step follow exactly for greedy chains of up to ``k`` drafts: a verify
step accepts the run of positions where the draft agrees, then emits the model's own token
(a draft that agrees predicts the true token, so teacher forcing gives the chain's
conditioning). The quantized copy here also computes the prefix's KV itself; a draft that
reads the model's exact KV for the verified prefix would agree at least as often.
Rows for comparison: the engine's prompt-lookup drafter replayed on the same answers, and the
lookup ceiling. Weight-only symmetric quantization, per output row or per group of inputs,
of every linear but the (tied) embedding and head.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from appliance.bench.spec_bench import Run, rag_prompts, run_prompt
from appliance.bench.spec_ceiling import lookup_ceiling
from appliance.bench.table import render
from appliance.core.config import ChatConfig
from engine.base import SamplingParams
from engine.embedded.engine import EmbeddedEngine
from engine.embedded.ngram_draft import DraftConfig, NgramDrafter
from engine.embedded.penalties import penalize
from engine.embedded.speculative import OFF

# (label, bits, group of inputs sharing a scale; 0: one scale per output row)
VARIANTS = (
    ("int8, a scale per row", 8, 0),
    ("int4, groups of 32", 4, 32),
    ("int4, groups of 64", 4, 64),
)


def quantized_copy(model: torch.nn.Module, bits: int, group: int) -> torch.nn.Module:
    """A copy of ``model`` whose ``nn.Linear`` weights (not ``lm_head``) are rounded to
    ``bits``-bit symmetric integers times a float scale per row, or per ``group`` inputs."""
    out = copy.deepcopy(model)
    top = 2 ** (bits - 1) - 1
    for name, module in out.named_modules():
        if not isinstance(module, torch.nn.Linear) or name.endswith("lm_head"):
            continue
        w = module.weight.data
        rows, cols = w.shape
        size = group or cols
        if cols % size:
            raise ValueError(f"{name}: {cols} inputs do not split into groups of {size}")
        g = w.view(rows, cols // size, size)
        scale = g.abs().amax(-1, keepdim=True).clamp(min=1e-12) / top
        module.weight.data = ((g / scale).round().clamp(-top - 1, top) * scale).view(rows, cols)
    return out


def greedy_choices(logits: torch.Tensor, answer: Sequence[int], sp: SamplingParams) -> list[int]:
    """The greedy token at each answer position from ``logits`` ``[len(answer), vocab]`` (row
    ``i`` predicts ``answer[i]``), after the penalties of the answer so far."""
    out = []
    counts: dict[int, int] = {}
    for i, row in enumerate(logits):
        ids = torch.tensor(list(counts), dtype=torch.int64)
        seen = torch.tensor(list(counts.values()), dtype=torch.float32)
        out.append(int(penalize(row, ids, seen, i, sp, ()).argmax()))
        counts[answer[i]] = counts.get(answer[i], 0) + 1
    return out


def chain_steps(agree: Sequence[bool], k: int) -> int:
    """Verify steps to emit positions ``1 ..`` of an answer (position 0 comes from the
    prefill) when a step drafts up to ``k`` tokens, keeps the run of them that agree and
    emits the model's own token after it."""
    done, steps = 1, 0
    while done < len(agree):
        run = 0
        while run < k and done + run < len(agree) and agree[done + run]:
            run += 1
        done += min(run + 1, len(agree) - done)
        steps += 1
    return steps


def lookup_steps(history: list[int], answer: list[int], config: DraftConfig) -> int:
    """Verify steps of the engine's prompt-lookup drafter to emit ``answer`` after
    ``history`` (greedy: a draft is kept while it equals the answer)."""
    drafter = NgramDrafter(config, history)
    done = steps = 0
    while done < len(answer):
        run = 0
        for token in drafter.propose():
            if done + run < len(answer) and answer[done + run] == token:
                run += 1
            else:
                break
        emitted = min(run + 1, len(answer) - done)
        drafter.extend(answer[done : done + emitted])
        done += emitted
        steps += 1
    return steps


@dataclass
class Tally:
    """Agreeing positions and chain steps over a split's answers."""

    agree: int = 0
    positions: int = 0  # answer tokens after the first (the prefill's)
    steps: int = 0

    def count(self, positions: int, steps: int) -> None:
        self.positions += positions
        self.steps += steps

    def add(self, agree: list[bool], steps: int) -> None:
        self.agree += sum(agree[1:])
        self.count(len(agree) - 1, steps)

    def rate(self) -> str:
        return f"{self.agree / self.positions:.3f}" if self.positions else "-"

    def per_step(self) -> str:
        return f"{self.positions / self.steps:.2f}" if self.steps else "-"


def _choices(model: torch.nn.Module, runs: list[Run], sp: SamplingParams) -> list[list[int]]:
    """``model``'s penalized greedy choice at every position of every answer (one pass each)."""
    out = []
    for r in runs:
        prompt, answer = r.prompt_ids, r.answer_ids
        with torch.inference_mode():
            logits = model(torch.tensor([prompt + answer])).logits[0]
        out.append(greedy_choices(logits[len(prompt) - 1 : -1], answer, sp))
    return out


def _lookup_rows(splits: dict[str, list[Run]], k: int) -> list[list[str]]:
    """The engine's drafter replayed, and the lookup ceiling, in tokens a step (both from the
    answer's second token, as the chains)."""
    lookup = {s: Tally() for s in splits}
    ceiling = {s: Tally() for s in splits}
    for split, runs in splits.items():
        for r in runs:
            history, rest = r.prompt_ids + r.answer_ids[:1], r.answer_ids[1:]
            lookup[split].count(len(rest), lookup_steps(history, rest, DraftConfig(max_tokens=k)))
            ceiling[split].count(*lookup_ceiling(history, rest, k))
    named = (("prompt lookup (the engine's drafter)", lookup), ("lookup ceiling", ceiling))
    return [[name, "-", "-", t["dev"].per_step(), t["held out"].per_step()] for name, t in named]


def _agreement_row(label: str, want: dict, got: dict, k: int) -> list[str]:
    """Agreement of ``got``'s choices with ``want``'s per split, and chain tokens a step."""
    tallies = {split: Tally() for split in want}
    for split in want:
        for w, g in zip(want[split], got[split], strict=True):
            agree = [x == y for x, y in zip(w, g, strict=True)]
            tallies[split].add(agree, chain_steps(agree, k))
    dev, held = tallies["dev"], tallies["held out"]
    return [label, dev.rate(), held.rate(), dev.per_step(), held.per_step()]


def run_draft_agreement(model_dir: Path, quick: bool = False, k: int = 4) -> str:
    """The table (see the module): per draft, agreement with the model's greedy choice and
    tokens a verify step for chains of up to ``k``, on dev and held-out RAG answers."""
    from transformers import AutoModelForCausalLM

    limit, new = (2, 16) if quick else (8, 96)
    sp = SamplingParams(new, repetition_penalty=ChatConfig().repetition_penalty)
    engine = EmbeddedEngine(model_dir, speculative=OFF, max_running=1)
    try:
        splits = {
            split: [run_prompt(engine, messages, sp) for messages in rag_prompts(limit, file)]
            for split, file in (("dev", "qa.json"), ("held out", "qa_heldout.json"))
        }
    finally:
        engine.close()
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    base = {split: _choices(model, runs, sp) for split, runs in splits.items()}
    engine_answers = {split: [r.answer_ids for r in runs] for split, runs in splits.items()}
    rows = _lookup_rows(splits, k)
    rows.append(
        _agreement_row("the float32 model, against the engine's answers", engine_answers, base, k)
    )
    for label, bits, group in VARIANTS[: 1 if quick else None]:
        draft = quantized_copy(model, bits, group)
        got = {split: _choices(draft, runs, sp) for split, runs in splits.items()}
        rows.append(_agreement_row(label, base, got, k))
    headers = [
        "draft",
        "agrees with the model, dev",
        "held out",
        f"tokens a step (up to {k} drafts), dev",
        "held out",
    ]
    n_dev, n_held = len(splits["dev"]), len(splits["held out"])
    note = (
        f"{n_dev} dev and {n_held} held-out grounded RAG answers of up to {new} tokens, greedy "
        "with the grounded repetition penalty; quantized rows agree with the float32 model's "
        "choice (free drafts: a draft's own cost is not counted)."
    )
    return render(headers, rows) + "\n" + note
