"""Prompt-lookup speculative decoding in the embedded engine: the same output with it on and
off (greedy, seeded sampling with penalties and logprobs, a grammar), under concurrent
batching; its accounting; rejected drafts leave no trace in the KV pool or the radix cache;
a request served without it says why."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

from engine.base import (
    Finished,
    GenerateRequest,
    LogprobDelta,
    LogprobOptions,
    SamplingParams,
    TextDelta,
)
from engine.embedded.attention_routes import NATIVE_PREFILL
from engine.embedded.engine import EmbeddedEngine
from engine.embedded.speculative import OFF, SpeculativeConfig

CORPUS = Path(__file__).resolve().parents[2] / "appliance" / "sample_corpus"


@pytest.fixture(scope="module")
def pair(model_dir):  # noqa: ANN001, ANN201
    """(off, on), both in float32. Where the CPU has native bf16 math the engine runs in
    bfloat16, whose logits come in steps of 1/8 at their size: two tokens often tie exactly,
    and which one wins depends on the batch's shape, with or without speculation (measured:
    the same engine's greedy answer batched and alone differed at such a tie). Exact identity
    is checked in float32; ``test_bf16_answers_differ_only_at_ties`` covers bfloat16."""
    engines = [
        EmbeddedEngine(
            model_dir, kv_budget_tokens=16384, max_queue=8, dtype="float32", speculative=spec
        )
        for spec in (OFF, SpeculativeConfig())
    ]
    yield tuple(engines)
    for eng in engines:
        eng.close()


def _run(eng: EmbeddedEngine, request: GenerateRequest) -> tuple[str, list[int], object]:
    text, tokens, stats = "", [], None
    for item in eng.generate(request):
        if isinstance(item, TextDelta):
            text += item.text
        elif isinstance(item, LogprobDelta) and not item.prompt:
            tokens += [t.token_id for t in item.tokens]
        elif isinstance(item, Finished):
            stats = item.stats
    return text, tokens, stats


def _rag_messages() -> tuple[tuple[str, str], ...]:
    text = (CORPUS / "it-helpdesk.txt").read_text(encoding="utf-8")[:600]
    return (
        ("system", "Answer using only the numbered documents. Quote them exactly."),
        ("user", f"Documents:\n\n[1] it-helpdesk.txt\n{text}\n\nQuestion: Quote document [1]."),
    )


PROMPTS = (
    _rag_messages(),
    (("user", "Count from 1 to 20, separated by commas."),),
    (("user", "Write a short poem about the sea."),),
    (("user", "Repeat after me three times: the quick brown fox jumps over the lazy dog."),),
)


def _concurrently(eng: EmbeddedEngine, requests: list[GenerateRequest]) -> list:
    out: list = [None] * len(requests)

    def one(i: int) -> None:
        out[i] = _run(eng, requests[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    return out


@pytest.fixture(scope="module")
def greedy(pair):  # noqa: ANN001, ANN201
    """Every prompt, greedy, all at once, on both engines: (off results, on results, the on
    engine's metrics before and after)."""
    off, on = pair
    requests = [
        GenerateRequest(
            messages=m, sampling=SamplingParams(32), logprobs=LogprobOptions(), request_id=None
        )
        for m in PROMPTS
    ]
    before = on.metrics()
    results_on = _concurrently(on, requests)
    after = on.metrics()
    return _concurrently(off, requests), results_on, before, after


def test_greedy_output_is_identical_on_and_off_under_batching(greedy) -> None:  # noqa: ANN001
    off, on, _, _ = greedy
    for (text_off, tokens_off, _), (text_on, tokens_on, _) in zip(off, on, strict=True):
        assert tokens_on == tokens_off
        assert text_on == text_off
    # the copying prompts did speculate, and some drafts were accepted
    assert sum(stats.spec_accepted_tokens for _, _, stats in on) > 0


def test_acceptance_is_accounted_per_request_and_in_metrics(greedy) -> None:  # noqa: ANN001
    _, on, before, after = greedy
    for _, tokens, stats in on:
        assert stats.speculative and stats.spec_declined == ""
        assert 0 <= stats.spec_accepted_tokens <= stats.spec_draft_tokens
        assert 0.0 <= stats.acceptance_rate <= 1.0
        # each verify step emits its accepted drafts plus one token of the model's own
        assert stats.completion_tokens >= 1 + stats.spec_verify_steps + stats.spec_accepted_tokens
        assert stats.completion_tokens == len(tokens)
    for key, field in (
        ("spec_draft_tokens_total", "spec_draft_tokens"),
        ("spec_accepted_tokens_total", "spec_accepted_tokens"),
        ("spec_verify_steps_total", "spec_verify_steps"),
    ):
        assert after[key] - before[key] == sum(getattr(s, field) for _, _, s in on)
    # SGLang's gauges, since start: the share of drafts accepted, tokens a verify step emits
    drafted, accepted = after["spec_draft_tokens_total"], after["spec_accepted_tokens_total"]
    steps = after["spec_verify_steps_total"]
    assert after["spec_accept_rate"] == pytest.approx(accepted / drafted)
    assert after["spec_accept_length"] == pytest.approx((accepted + steps) / steps)
    assert after["spec_accept_length"] >= 1.0


def test_rejected_drafts_leave_no_trace_in_pool_or_cache(pair, greedy) -> None:  # noqa: ANN001
    off, on = pair
    _, results_on, _, _ = greedy
    sched = on._scheduler
    assert not sched.active and not sched.decoding
    assert all(owner is None for owner in sched.owners)  # no leaked pool rows
    rejected = 0
    for messages, (_, tokens, stats) in zip(PROMPTS, results_on, strict=True):
        rejected += stats.spec_draft_tokens - stats.spec_accepted_tokens
        # the KV cached for prompt + answer (the last token is never fed) is the KV the
        # engine without speculation cached for it: no rejected draft's KV stayed behind
        ids = on.encode(on.render_chat(messages)) + tokens[:-1]
        n_on, kv_on = sched.cache.match(ids)
        n_off, kv_off = off._scheduler.cache.match(ids)
        assert n_on == n_off == len(ids)
        for (k1, v1), (k2, v2) in zip(kv_on, kv_off, strict=True):
            assert torch.allclose(k1.float(), k2.float(), atol=2e-2, rtol=0)
            assert torch.allclose(v1.float(), v2.float(), atol=2e-2, rtol=0)
    assert rejected > 0  # the check above saw rollbacks


def test_seeded_sampling_with_penalties_and_logprobs_is_identical(pair) -> None:  # noqa: ANN001
    off, on = pair
    sampling = SamplingParams(
        32, temperature=0.8, top_p=0.95, seed=11, repetition_penalty=1.1, frequency_penalty=0.2
    )
    request = GenerateRequest(
        messages=PROMPTS[1], sampling=sampling, logprobs=LogprobOptions(top_n=2)
    )
    text_off, tokens_off, _ = _run(off, request)
    text_on, tokens_on, stats = _run(on, request)
    assert (text_on, tokens_on) == (text_off, tokens_off)
    assert stats.spec_verify_steps > 0


def test_grammar_constrained_output_is_identical(pair) -> None:  # noqa: ANN001
    off, on = pair
    request = GenerateRequest(
        prompt="Numbers: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1, 2, 3,",
        sampling=SamplingParams(24),
        regex=r"( [0-9]+,){1,12}",
    )
    assert _run(on, request)[0] == _run(off, request)[0]


def test_a_request_served_without_speculation_says_why(pair) -> None:  # noqa: ANN001
    off, _ = pair
    _, _, stats = _run(off, GenerateRequest(prompt="Hello", sampling=SamplingParams(2)))
    assert stats.speculative is False
    assert "off" in stats.spec_declined
    assert stats.spec_draft_tokens == 0


def test_speculation_is_switched_for_the_next_requests(pair) -> None:  # noqa: ANN001
    _, on = pair
    request = GenerateRequest(prompt="Hello", sampling=SamplingParams(2))
    try:
        on.set_speculative(OFF)
        _, _, stats = _run(on, request)
        assert stats.speculative is False and "off" in stats.spec_declined
    finally:
        on.set_speculative(SpeculativeConfig())
    _, _, stats = _run(on, request)
    assert stats.speculative is True and stats.spec_declined == ""


def test_a_step_runs_only_the_drafts_its_cost_allows(pair, greedy) -> None:  # noqa: ANN001
    """The engine measured its steps' costs when it loaded (``draft_budget.py``); with costs
    under which no draft pays (a second row costs 100x the first), requests still speculate
    (drafters run) but no decode step verifies a draft, and the answers are the plain ones.
    One request at a time: a step that carries another's prompt chunk keeps its drafts."""
    from engine.embedded.draft_budget import DraftBudget, StepCosts

    _, on = pair
    results_off, results_on, _, _ = greedy
    sched = on._scheduler
    measured = sched.budget
    assert measured is not None and measured.costs.rows[0] == 1
    assert sum(s.spec_draft_tokens for _, _, s in results_on) > 0  # recorded as they ran
    assert measured.drafted > 0 and 0 < measured.rate < 1
    requests = [GenerateRequest(messages=m, sampling=SamplingParams(16)) for m in PROMPTS]
    try:
        sched.budget = DraftBudget(StepCosts((1, 2), (1.0, 100.0)))  # a second row: 100x
        results = [_run(on, r) for r in requests]
    finally:
        sched.budget = measured
    for (text, _, stats), (text_off, _, _) in zip(results, results_off, strict=True):
        assert stats.speculative and stats.spec_draft_tokens == 0
        assert text_off.startswith(text)


def test_bf16_answers_differ_only_at_ties(model_dir) -> None:  # noqa: ANN001
    """In the engine's own dtype (bfloat16 where the CPU has it), speculation's answer is the
    plain one until a position where the plain engine's two best tokens (nearly) tie: a
    draft is accepted only where the model itself would have chosen it."""
    engines = [
        EmbeddedEngine(model_dir, kv_budget_tokens=8192, max_queue=4, speculative=spec)
        for spec in (OFF, SpeculativeConfig())
    ]
    try:
        for messages in PROMPTS:
            request = GenerateRequest(
                messages=messages, sampling=SamplingParams(32), logprobs=LogprobOptions(top_n=2)
            )
            answers = []
            for eng in engines:
                chosen = []
                for item in eng.generate(request):
                    if isinstance(item, LogprobDelta) and not item.prompt:
                        chosen += [(t.token_id, t.logprob, dict(t.top)) for t in item.tokens]
                answers.append(chosen)
            plain, fast = answers
            for (token, logprob, top), (other, _, _) in zip(plain, fast, strict=False):
                if token != other:
                    # the plain engine rated the other token (nearly) as high: within one
                    # rounding step of a bf16 logit (1/8 at this size), with room
                    assert other in top and logprob - top[other] <= 0.25, (token, other, top)
                    break
    finally:
        for eng in engines:
            eng.close()


def test_greedy_answer_is_the_same_alone_batched_speculating_and_cached(model_dir) -> None:  # noqa: ANN001
    """Where the engine runs every linear on its native GEMV and attention on its native
    kernels (AVX-512 in bfloat16 on a CPU without AMX tiles; AVX2 in float32), a row is
    computed alike whatever else its step holds: other requests' prompt chunks and decode
    rows, a shared prompt prefix read once for all, its own drafts, or a cached prefix. So a
    greedy answer is token for token the same alone and cold, batched with requests that
    share its documents, with speculation on, and served from the prefix cache. (Elsewhere
    oneDNN's GEMM rounds a row by its step's size, and answers may differ at near-ties:
    ``test_bf16_answers_differ_only_at_ties``.)"""
    eng = EmbeddedEngine(model_dir, kv_budget_tokens=16384, max_queue=8, speculative=OFF)
    try:
        runtime, scheduler = eng.runtime, eng._scheduler
        native_prefill = scheduler.kernel is not None or scheduler.prefiller is not None
        if (
            "native GEMV" not in runtime
            or "for every step" not in runtime
            or scheduler.route != NATIVE_PREFILL
            or not native_prefill
        ):
            pytest.skip(f"rows are not computed alike in every step here: {runtime}")
        system, user = _rag_messages()
        prompts = [
            *PROMPTS,
            (system, (user[0], user[1].replace("Quote document [1].", "Who answers the phone?"))),
            (system, (user[0], user[1].replace("Quote document [1].", "Summarise [1]."))),
        ]
        requests = [
            GenerateRequest(messages=m, sampling=SamplingParams(32), logprobs=LogprobOptions())
            for m in prompts
        ]
        alone = []
        for request in requests:
            eng.flush_cache()
            alone.append(_run(eng, request)[1])
        eng.flush_cache()
        eng.set_speculative(SpeculativeConfig())
        batched = [tokens for _, tokens, _ in _concurrently(eng, requests)]
        cached = [_run(eng, request)[1] for request in requests]  # every prompt is cached now
    finally:
        eng.close()
    assert batched == alone
    assert cached == alone


def test_a_question_asked_again_drafts_from_its_earlier_answer(pair) -> None:  # noqa: ANN001
    """The engine keeps finished answers in its draft pool (``draft_pool.py``): asked again,
    a question that copies little from its prompt drafts its whole earlier answer, and the
    answer is the same. With the pool off for the config, drafts come from the request's own
    history again; while the pool is not learning, it holds nothing new."""
    _, on = pair
    request = GenerateRequest(
        messages=(("user", "Describe a busy market in the morning."),),
        sampling=SamplingParams(48, ignore_eos=True),
    )
    pool = on.draft_pool
    pool.clear()
    try:
        pool.learning = False
        _run(on, request)
        assert pool.size == 0
        pool.learning = True
        first_text, _, first = _run(on, request)
        assert pool.size == first.completion_tokens
        again_text, _, again = _run(on, request)
        on.set_speculative(SpeculativeConfig(pool_tokens=0))
        own_text, _, own = _run(on, request)
    finally:
        on.set_speculative(SpeculativeConfig())
        pool.learning = True
    assert again_text == first_text == own_text
    # nearly every token after the first came from an accepted draft: few verify steps
    assert again.spec_accepted_tokens >= 0.6 * (again.completion_tokens - 1)
    assert again.spec_accepted_tokens > 2 * max(1, first.spec_accepted_tokens)
    assert own.spec_accepted_tokens < again.spec_accepted_tokens
