"""Conformance of constrained output and logprobs, for every ``Engine`` backend (the backends
are ``tests/engine/conftest.py``'s; the rest of the contract is test_engine_conformance.py)."""

from __future__ import annotations

import json
import re

import pytest
from support.backends import Backend

from engine.base import (
    Engine,
    GenerateRequest,
    GenerationStats,
    LogprobDelta,
    LogprobOptions,
    SamplingParams,
    TextDelta,
)


def test_json_schema_output_validates(backend: Backend) -> None:
    import jsonschema

    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    request = GenerateRequest(
        prompt="Answer as JSON: is the sky blue?",
        sampling=SamplingParams(max_new_tokens=24),
        json_schema=json.dumps(schema),
    )
    text = "".join(i.text for i in backend.engine.generate(request) if isinstance(i, TextDelta))
    jsonschema.validate(json.loads(text), schema)


def test_regex_and_ebnf_constraints(backend: Backend) -> None:
    sampling = SamplingParams(max_new_tokens=12, temperature=0.7, seed=11)
    for kind, value, pattern in (
        ("regex", r"\d{4}-\d{2}-\d{2}", r"\d{4}-\d{2}-\d{2}"),
        ("ebnf", 'root ::= ("yes" | "no") "!"', r"(yes|no)!"),
    ):
        request = GenerateRequest(prompt="Reply:", sampling=sampling, **{kind: value})
        items = list(backend.engine.generate(request))
        text = "".join(i.text for i in items if isinstance(i, TextDelta))
        assert re.fullmatch(pattern, text), (kind, text)


def logprob_run(eng: Engine, options: LogprobOptions) -> tuple[list, list, GenerationStats]:
    request = GenerateRequest(
        prompt=LOGPROB_PROMPT,
        sampling=SamplingParams(max_new_tokens=4, temperature=0.0, ignore_eos=True),
        logprobs=options,
    )
    prompt_lp, output_lp, stats, texts = [], [], None, 0
    for item in eng.generate(request):
        if isinstance(item, LogprobDelta):
            assert not (item.prompt and (texts or output_lp)), "prompt logprobs come first"
            (prompt_lp if item.prompt else output_lp).extend(item.tokens)
        elif isinstance(item, TextDelta):
            texts += 1
        else:
            stats = item.stats
    assert stats is not None
    return prompt_lp, output_lp, stats


LOGPROB_PROMPT = "The capital of France is Paris. The capital of Germany is"


def test_logprobs_stream_before_their_text(backend: Backend, engine) -> None:  # noqa: ANN001
    options = LogprobOptions(start_len=2, top_n=2, token_ids=(5,))
    prompt_lp, output_lp, stats = logprob_run(backend.engine, options)
    ids = backend.engine.encode(LOGPROB_PROMPT)
    assert [t.token_id for t in prompt_lp] == ids[2:] or backend.real_sglang
    assert len(output_lp) == stats.completion_tokens == 4
    for entry in prompt_lp[1:] + output_lp:
        assert entry.logprob is not None and entry.logprob <= 0.0
        assert len(entry.top) == 2 and [i for i, _ in entry.asked] == [5]
    if backend.real_sglang:
        return
    # the same engine in-process: the same tokens and values (batching may move the last bits)
    ref_prompt, ref_output, _ = logprob_run(engine, options)
    assert [t.token_id for t in output_lp] == [t.token_id for t in ref_output]
    for mine, ref in zip(prompt_lp + output_lp, ref_prompt + ref_output, strict=True):
        assert (mine.logprob is None) == (ref.logprob is None)
        if ref.logprob is not None:
            assert mine.logprob == pytest.approx(ref.logprob, abs=0.05)
