"""Logprobs in-process: values against plain ``transformers`` (float32), SGLang's positions and
alternatives, the prefix cache kept for scoring, and the checks on bad options.

The engine here runs in float32 (its own instance), so its logits are comparable with the
stock model's to well under 1e-3.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from engine.base import (
    Finished,
    GenerateRequest,
    GenerationStats,
    InvalidRequest,
    LogprobDelta,
    LogprobOptions,
    SamplingParams,
    TextDelta,
    TokenLogprob,
)
from engine.embedded.engine import EmbeddedEngine

PROMPT = "The capital of France is Paris. The capital of Germany is"


@pytest.fixture(scope="module")
def fp32(model_dir: Path) -> Iterator[EmbeddedEngine]:
    eng = EmbeddedEngine(model_dir, dtype="float32", kv_budget_tokens=8192, max_running=4)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def reference(model_dir: Path):  # noqa: ANN201
    """The stock transformers model in float32: log_softmax of its logits per position."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()

    def logprobs(ids: list[int]) -> torch.Tensor:
        with torch.inference_mode():
            logits = model(torch.tensor([ids])).logits[0].float()
        return torch.log_softmax(logits, dim=-1), logits

    return logprobs


def run(
    eng: EmbeddedEngine, options: LogprobOptions | None, prompt: str = PROMPT, **sampling: object
) -> tuple[list[TokenLogprob], list[TokenLogprob], str, GenerationStats]:
    sp = SamplingParams(**{"max_new_tokens": 6, "temperature": 0.0, **sampling})
    prompt_lp: list[TokenLogprob] = []
    output_lp: list[TokenLogprob] = []
    text, stats, prompt_items = "", None, 0
    for item in eng.generate(GenerateRequest(prompt=prompt, sampling=sp, logprobs=options)):
        if isinstance(item, LogprobDelta) and item.prompt:
            assert not text and not output_lp, "prompt logprobs come before any output"
            prompt_items += 1
            prompt_lp += item.tokens
        elif isinstance(item, LogprobDelta):
            output_lp += item.tokens
        elif isinstance(item, TextDelta):
            text += item.text
        else:
            assert isinstance(item, Finished)
            stats = item.stats
    assert prompt_items <= 1
    assert stats is not None
    return prompt_lp, output_lp, text, stats


def test_greedy_logprobs_match_transformers_in_float32(fp32: EmbeddedEngine, reference) -> None:  # noqa: ANN001
    fp32.flush_cache()
    ids = fp32.encode(PROMPT)
    prompt_lp, output_lp, _, stats = run(fp32, LogprobOptions(start_len=0, top_n=3))
    assert [t.token_id for t in prompt_lp] == ids
    assert prompt_lp[0].logprob is None and prompt_lp[0].top == ()
    assert len(output_lp) == stats.completion_tokens == 6
    full = ids + [t.token_id for t in output_lp]
    ref, _ = reference(full)
    entries = prompt_lp + output_lp
    worst = max(abs(entries[p].logprob - ref[p - 1, full[p]].item()) for p in range(1, len(full)))
    assert worst < 1e-3, worst
    for t in output_lp:  # greedy: the chosen token is the most likely one
        assert t.top[0][0] == t.token_id and t.top[0][1] == pytest.approx(t.logprob)
    for p, t in enumerate(entries[1:], start=1):
        values = [lp for _, lp in t.top]
        assert values == sorted(values, reverse=True) and len(values) == 3
        best = torch.topk(ref[p - 1], 3)
        assert [i for i, _ in t.top] == best.indices.tolist()


def test_sampled_logprobs_are_of_the_tempered_distribution(
    fp32: EmbeddedEngine,
    reference,  # noqa: ANN001
) -> None:
    ids = fp32.encode(PROMPT)
    _, output_lp, _, _ = run(fp32, LogprobOptions(), temperature=0.7, seed=7, top_p=0.9)
    full = ids + [t.token_id for t in output_lp]
    _, logits = reference(full)
    for i, t in enumerate(output_lp):
        row = logits[len(ids) - 1 + i]
        expected = torch.log_softmax(row / 0.7, dim=-1)[t.token_id].item()
        assert t.logprob == pytest.approx(expected, abs=1e-3)


def test_a_later_start_scores_from_there_and_reuses_the_cache(
    fp32: EmbeddedEngine,
    reference,  # noqa: ANN001
) -> None:
    fp32.flush_cache()
    prefix = "Question: which planet is known as the red planet? Answer:"
    run(fp32, None, prompt=prefix, max_new_tokens=1)  # caches the prefix
    n = fp32.count_tokens(prefix)
    start = n - 2  # what SGLang's frontend sends for select
    choices = [" Mars", " Venus", " Jupiter", " the Moon"]
    for choice in choices:
        ids = fp32.encode(prefix + choice)
        prompt_lp, _, _, stats = run(fp32, LogprobOptions(start_len=start), prompt=prefix + choice)
        # the shared prefix is prefilled once: each choice reuses all of it but the last
        # two positions' tokens (SGLang's cap: the positions scored are computed anew)
        assert stats.cached_tokens == start - 1
        assert [t.token_id for t in prompt_lp] == ids[start:]
        ref, _ = reference(ids)
        for offset, t in enumerate(prompt_lp):
            p = start + offset
            assert t.logprob == pytest.approx(ref[p - 1, ids[p]].item(), abs=1e-3)


def test_asked_token_ids_and_the_edges_of_the_prompt(fp32: EmbeddedEngine) -> None:
    ids = fp32.encode(PROMPT)
    asked = (5, 28, 1000)
    prompt_lp, output_lp, _, _ = run(fp32, LogprobOptions(start_len=len(ids) - 1, token_ids=asked))
    assert len(prompt_lp) == 1 and prompt_lp[0].token_id == ids[-1]
    for t in prompt_lp + output_lp:
        assert [i for i, _ in t.asked] == list(asked)
        assert all(lp <= 0.0 for _, lp in t.asked)
    # the whole prompt's length: no prompt token; -1: none either; the output always
    for start in (len(ids), -1):
        prompt_lp, output_lp, _, stats = run(fp32, LogprobOptions(start_len=start))
        assert prompt_lp == [] and len(output_lp) == stats.completion_tokens


def test_no_logprob_items_unless_asked(fp32: EmbeddedEngine) -> None:
    req = GenerateRequest(prompt=PROMPT, sampling=SamplingParams(max_new_tokens=3))
    assert not any(isinstance(item, LogprobDelta) for item in fp32.generate(req))


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        (LogprobOptions(start_len=10_000), "logprob_start_len"),
        (LogprobOptions(start_len=-2), "logprob_start_len"),
        (LogprobOptions(top_n=10**7), "top_logprobs_num"),
        (LogprobOptions(token_ids=(-1,)), "token_ids_logprob"),
        (LogprobOptions(token_ids=(10**8,)), "token_ids_logprob"),
        # every vocabulary entry at each of ~40 positions: millions of entries to build
        (LogprobOptions(start_len=0, top_n=49152), "over the limit"),
    ],
)
def test_bad_logprob_options_are_refused_before_any_work(
    fp32: EmbeddedEngine, options: LogprobOptions, needle: str
) -> None:
    before = fp32.metrics()["num_requests_total"]
    with pytest.raises(InvalidRequest, match=needle):
        fp32.generate(GenerateRequest(prompt=PROMPT, logprobs=options))
    assert fp32.metrics()["num_requests_total"] == before
