"""Repetition control through the real engine: in-process, over ``/generate`` and ``/v1``, and
through the SGLang client; out-of-range values are 400 with SGLang's messages.

A prompt the small model continues by repeating one sentence (greedy) stops repeating under
each penalty, and every path gives the in-process engine's exact text.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from engine.base import Finished, GenerateRequest, InvalidRequest, SamplingParams, TextDelta
from engine.sglang.client import SGLangEngine

SENTENCE = "the badge desk is on floor two."
# four times: with three, the bf16 model (CPUs with AVX-512 BF16) answers "The answer is: 2"
# instead of looping; with four, it loops in fp32 and bf16 alike, and each penalty below ends
# the loop in both (checked on both dtypes)
LOOP = "Repeat after me: " + " ".join([SENTENCE] * 4)
PENALTIES = {"repetition_penalty": 1.5, "frequency_penalty": 1.5, "presence_penalty": 1.5}


def run(engine, request: GenerateRequest) -> tuple[str, object]:  # noqa: ANN001
    text, stats = "", None
    for item in engine.generate(request):
        if isinstance(item, TextDelta):
            text += item.text
        elif isinstance(item, Finished):
            stats = item.stats
    return text, stats


@pytest.fixture(scope="module")
def looped(engine) -> str:  # noqa: ANN001
    text, _ = run(engine, GenerateRequest(prompt=LOOP, sampling=SamplingParams(max_new_tokens=40)))
    assert text.count(SENTENCE) >= 3  # the model loops without a penalty
    return text


@pytest.mark.parametrize("name", sorted(PENALTIES))
def test_each_penalty_ends_the_loop_in_process(engine, looped: str, name: str) -> None:  # noqa: ANN001
    sp = SamplingParams(max_new_tokens=40, **{name: PENALTIES[name]})
    text, _ = run(engine, GenerateRequest(prompt=LOOP, sampling=sp))
    assert text.count(SENTENCE) <= 1 and text != looped


def test_min_new_tokens_holds_back_the_end(engine) -> None:  # noqa: ANN001
    messages = (("user", "Say OK."),)
    _, short = run(engine, GenerateRequest(messages=messages, sampling=SamplingParams(40)))
    assert short.finish_reason == "stop" and isinstance(short.matched_stop, int)
    floor = short.completion_tokens + 5
    sp = SamplingParams(max_new_tokens=floor + 20, min_new_tokens=floor)
    _, held = run(engine, GenerateRequest(messages=messages, sampling=sp))
    assert held.completion_tokens >= floor


def test_top_k_1_is_greedy_at_any_temperature(engine) -> None:  # noqa: ANN001
    greedy = SamplingParams(max_new_tokens=12, temperature=0.0)
    hot = SamplingParams(max_new_tokens=12, temperature=1.5, top_k=1, seed=3)
    req = GenerateRequest(prompt="The capital of France is", sampling=greedy)
    assert run(engine, req)[0] == run(engine, GenerateRequest(prompt=req.prompt, sampling=hot))[0]


def test_the_engine_refuses_out_of_range_values(engine) -> None:  # noqa: ANN001
    with pytest.raises(InvalidRequest, match=r"repetition_penalty must be in \(0, 2\]"):
        engine.generate(GenerateRequest(prompt="x", sampling=SamplingParams(repetition_penalty=3)))


def test_generate_and_the_sglang_client_pass_them_through(
    engine,
    http: httpx.Client,
    base: str,
    model_dir: Path,  # noqa: ANN001
) -> None:
    sp = SamplingParams(max_new_tokens=30, repetition_penalty=1.3, frequency_penalty=0.2)
    expected, _ = run(engine, GenerateRequest(prompt=LOOP, sampling=sp))
    params = {
        "max_new_tokens": 30, "temperature": 0, "repetition_penalty": 1.3,
        "frequency_penalty": 0.2, "presence_penalty": 0.0, "min_p": 0.0, "top_k": -1,
        "min_new_tokens": 0,
    }  # fmt: skip
    r = http.post("/generate", json={"text": LOOP, "sampling_params": params})
    assert r.status_code == 200, r.text
    assert r.json()["text"] == expected
    client = SGLangEngine(base, tokenizer=str(model_dir), timeout_s=60)
    try:
        assert run(client, GenerateRequest(prompt=LOOP, sampling=sp))[0] == expected
        with pytest.raises(InvalidRequest, match="min_p"):
            client.generate(GenerateRequest(prompt="x", sampling=SamplingParams(min_p=2.0)))
    finally:
        client.close()


def test_v1_takes_openai_and_sglang_fields(engine, oai) -> None:  # noqa: ANN001
    sp = SamplingParams(max_new_tokens=30, presence_penalty=1.5, min_new_tokens=3)
    expected, _ = run(engine, GenerateRequest(prompt=LOOP, sampling=sp))
    out = oai.completions.create(
        model="x",
        prompt=LOOP,
        max_tokens=30,
        temperature=0,
        presence_penalty=1.5,
        extra_body={"min_tokens": 3, "repetition_penalty": 1.0, "min_p": 0.0, "top_k": -1},
    )
    assert out.choices[0].text == expected
    chat = oai.chat.completions.create(
        model="x",
        messages=[{"role": "user", "content": LOOP}],
        max_tokens=8,
        frequency_penalty=0.5,
        temperature=1.2,
        extra_body={"top_k": 1},
    )
    assert chat.choices[0].message.content


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"frequency_penalty": 2.5}, "frequency_penalty must be in [-2, 2], got 2.5."),
        ({"presence_penalty": -2.1}, "presence_penalty must be in [-2, 2]"),
        ({"repetition_penalty": 0}, "repetition_penalty must be in (0, 2]"),
        ({"min_p": -0.1}, "min_p must be in [0, 1]"),
        ({"top_k": 0}, "top_k must be -1 (disable) or at least 1, got 0."),
        ({"min_new_tokens": 9, "max_new_tokens": 4}, "min_new_tokens must be in [0, max_new"),
        ({"repetition_penalty": "high"}, "repetition_penalty must be a finite number"),
    ],
)
def test_out_of_range_is_400_on_generate(http: httpx.Client, params: dict, needle: str) -> None:
    r = http.post("/generate", json={"text": "x", "sampling_params": params})
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"]["message"]


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"frequency_penalty": -3}, "frequency_penalty must be in [-2, 2]"),
        ({"presence_penalty": 2.5}, "presence_penalty must be in [-2, 2]"),
        ({"repetition_penalty": 2.5}, "repetition_penalty must be in (0, 2]"),
        ({"min_p": 1.5}, "min_p must be in [0, 1]"),
        ({"top_k": -5}, "top_k must be -1 (disable) or at least 1"),
        ({"min_tokens": 50, "max_tokens": 5}, "min_new_tokens must be in [0, max_new_tokens(5)]"),
    ],
)
def test_out_of_range_is_400_on_v1(http: httpx.Client, fields: dict, needle: str) -> None:
    body = {"model": "x", "messages": [{"role": "user", "content": "x"}], **fields}
    r = http.post("/v1/chat/completions", json=body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and needle in err["message"]
