"""The SGLang-compatible engine server over real HTTP: uvicorn on a free port in a thread, the
real embedded engine (SmolLM2-135M on the CPU), httpx and the official ``openai`` client.

Answers are kept to a few tokens: the model decodes at a few tokens per second here.
This file: the native ``/generate`` API.
"""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from support.servers import (
    SAMPLING_NULLS,
    data_lines,
    generate,
    metric_value,
    wait_idle,
)

# ---- native /generate -------------------------------------------------------------------


def test_generate_streams_cumulative_text_then_done(http: httpx.Client) -> None:
    body = {
        "text": "The three primary colours are",
        "sampling_params": {"max_new_tokens": 6, "temperature": 0, "ignore_eos": True},
        "stream": True,
    }
    with http.stream("POST", "/generate", json=body) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = list(data_lines(r))
    assert lines[-1] == "[DONE]"
    chunks = [json.loads(line) for line in lines[:-1]]  # every line is one JSON document
    texts = [c["text"] for c in chunks]
    assert len(chunks) >= 2
    for before, after in zip(texts, texts[1:], strict=False):
        assert after.startswith(before)  # cumulative: the client diffs it
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])
    rid = chunks[0]["meta_info"]["id"]
    assert rid and all(c["meta_info"]["id"] == rid for c in chunks)
    final = chunks[-1]["meta_info"]
    assert final["finish_reason"] == {"type": "length", "length": 6}
    assert final["completion_tokens"] == 6 and final["prompt_tokens"] > 0
    assert final["cached_tokens"] >= 0 and final["e2e_latency"] > 0
    assert texts[-1]


def test_generate_non_streamed_with_input_ids_and_ignore_eos(http: httpx.Client, engine) -> None:  # noqa: ANN001
    ids = engine.encode("Write a list of fruits:")
    out = generate(
        http,
        input_ids=ids,
        sampling_params={"max_new_tokens": 5, "temperature": 0, "ignore_eos": True},
        rid=f"ids-{uuid.uuid4().hex}",
    )
    meta = out["meta_info"]
    assert isinstance(out["text"], str)
    assert meta["id"].startswith("ids-")
    assert meta["prompt_tokens"] == len(ids)
    assert meta["completion_tokens"] == 5  # ignore_eos: exactly max_new_tokens
    assert meta["finish_reason"] == {"type": "length", "length": 5}
    assert meta["e2e_latency"] > 0


def test_explicit_nulls_and_prefill_only(http: httpx.Client) -> None:
    out = generate(
        http,
        text=f"Prefill only {uuid.uuid4().hex}",
        sampling_params={"max_new_tokens": 0, **SAMPLING_NULLS},
        rid=None,
        return_logprob=False,
        logprob_start_len=-1,
        top_logprobs_num=None,
        lora_path=None,
        stream=None,
    )
    assert out["text"] == ""
    assert out["meta_info"]["completion_tokens"] == 0
    assert out["meta_info"]["finish_reason"] == {"type": "length", "length": 0}
    assert out["meta_info"]["prompt_tokens"] > 0


def test_batched_text_answers_a_list(http: httpx.Client) -> None:
    r = http.post(
        "/generate",
        json={
            "text": ["One, two,", "Red, green,"],
            "sampling_params": {"max_new_tokens": 2, "temperature": 0, "ignore_eos": True},
        },
    )
    assert r.status_code == 200, r.text
    out = r.json()
    assert isinstance(out, list) and len(out) == 2
    assert all(o["meta_info"]["completion_tokens"] == 2 for o in out)
    assert out[0]["meta_info"]["id"] != out[1]["meta_info"]["id"]


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"text": "x", "sampling_params": {"max_new_tokens": 2, "bogus": 1}}, "bogus"),
        ({"text": "x", "sampling_params": {"stop_token_ids": [2]}}, "stop_token_ids"),
        ({"text": "x", "sampling_params": {"regex": "a+", "ebnf": 'root ::= "a"'}}, "Only one"),
        ({"text": "x", "sampling_params": {"regex": "("}}, "regex"),
        ({"text": "x", "sampling_params": {"structural_tag": "{}"}}, "structural_tag"),
        ({"text": "x", "sampling_params": {"n": 0}}, "sampling_params.n"),
        ({"text": "x", "sampling_params": {"n": 65}}, "sampling_params.n"),
        ({"text": "x", "sampling_params": {"top_k": 0}}, "top_k"),
        ({"text": "x", "sampling_params": {"logit_bias": {"1": 2.0}}}, "logit_bias"),
        ({"text": "x", "sampling_params": {"max_new_tokens": -1}}, "max_new_tokens"),
        ({"text": "x", "return_logprob": True, "logprob_start_len": 5}, "logprob_start_len"),
        ({"text": "x", "return_logprob": True, "logprob_start_len": -2}, "logprob_start_len"),
        ({"text": "x", "return_logprob": True, "top_logprobs_num": 10**6}, "top_logprobs_num"),
        ({"text": "x", "return_logprob": True, "token_ids_logprob": [10**9]}, "token_ids_logprob"),
        ({"text": "x", "lora_path": "adapter"}, "lora_path"),
        ({"sampling_params": {}}, "text or input_ids"),
        ({"text": "x", "sampling_params": {"temperature": "hot"}}, "temperature"),
    ],
)
def test_bad_native_requests_are_400(http: httpx.Client, body: dict, needle: str) -> None:
    before = http.get("/metrics").text
    r = http.post("/generate", json=body)
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"]["message"]
    assert metric_value(http.get("/metrics").text, "sglang:num_requests_total") == metric_value(
        before, "sglang:num_requests_total"
    )


def test_shared_prefix_is_reported_as_cached(http: httpx.Client, engine) -> None:  # noqa: ANN001
    prefix = (
        f"Document {uuid.uuid4().hex}. "
        + "The appliance keeps a radix tree of prompt prefixes so repeated context is reused. " * 12
    )
    first, second = prefix + "Question: what is kept?", prefix + "Question: why reuse it?"
    ids1, ids2 = engine.encode(first), engine.encode(second)
    shared = next(i for i, (a, b) in enumerate(zip(ids1, ids2, strict=False)) if a != b)
    assert shared > 150
    params = {"max_new_tokens": 1, "temperature": 0}
    one = generate(http, text=first, sampling_params=params)["meta_info"]
    two = generate(http, text=second, sampling_params=params)["meta_info"]
    assert one["cached_tokens"] < shared
    assert two["cached_tokens"] >= shared
    assert two["prompt_tokens"] == len(ids2)


def test_prompt_over_the_context_window_is_400_and_runs_nothing(
    http: httpx.Client,
    engine,  # noqa: ANN001
) -> None:
    text = "overflow " * (engine.info().context_length + 200)
    before = wait_idle(engine)
    for stream in (False, True):
        r = http.post("/generate", json={"text": text, "stream": stream, "sampling_params": {}})
        assert r.status_code == 400
        message = r.json()["error"]["message"]
        assert "context window" in message and str(engine.info().context_length) in message
    after = engine.metrics()
    assert after["num_requests_total"] == before["num_requests_total"]
    assert after["generation_tokens_total"] == before["generation_tokens_total"]
