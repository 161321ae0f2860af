"""``/v1`` logprobs (OpenAI's shapes, streamed and not), ``n`` and the constraint extensions,
through the official ``openai`` client against the embedded engine's server."""

from __future__ import annotations

import json
import re

import httpx
import openai
import pytest
from support.servers import MODEL

PROMPT = "The capital of France is Paris. The capital of Germany is"


def test_completions_logprobs(oai: openai.OpenAI) -> None:
    out = oai.completions.create(
        model=MODEL, prompt=PROMPT, max_tokens=5, temperature=0, logprobs=2
    )
    choice = out.choices[0]
    lp = choice.logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 5
    assert "".join(lp.tokens).startswith(choice.text)
    for token, value, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs, strict=True):
        assert value <= 0.0 and len(top) <= 2
        assert max(top.values()) == pytest.approx(value)  # greedy: the best one was taken
        assert token in top
    plain = oai.completions.create(model=MODEL, prompt=PROMPT, max_tokens=2, logprobs=0)
    assert plain.choices[0].logprobs.top_logprobs == []


def test_completions_logprobs_streamed(oai: openai.OpenAI) -> None:
    kwargs = {"model": MODEL, "prompt": PROMPT, "max_tokens": 6, "temperature": 0}
    whole = oai.completions.create(**kwargs, logprobs=1).choices[0].logprobs
    tokens: list[str] = []
    values: list[float] = []
    for chunk in oai.completions.create(**kwargs, logprobs=1, stream=True):
        lp = chunk.choices[0].logprobs
        if lp is not None:
            tokens += lp.tokens
            values += lp.token_logprobs
    assert tokens == whole.tokens
    assert values == pytest.approx(whole.token_logprobs, abs=0.05)


def test_chat_logprobs_streamed_and_not(oai: openai.OpenAI) -> None:
    kwargs = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Name a colour."}],
        "max_tokens": 5,
        "temperature": 0,
        "logprobs": True,
        "top_logprobs": 3,
    }
    whole = oai.chat.completions.create(**kwargs).choices[0]
    content = whole.logprobs.content
    assert 1 <= len(content) <= 5
    for entry in content:
        assert bytes(entry.bytes).decode("utf-8", errors="replace") == entry.token
        assert (
            len(entry.top_logprobs) == 3 and entry.top_logprobs[0].logprob >= entry.logprob - 1e-6
        )
    streamed = []
    for chunk in oai.chat.completions.create(**kwargs, stream=True):
        if chunk.choices and chunk.choices[0].logprobs is not None:
            streamed += chunk.choices[0].logprobs.content
    assert [e.token for e in streamed] == [e.token for e in content]


def test_n_choices(oai: openai.OpenAI) -> None:
    out = oai.completions.create(
        model=MODEL,
        prompt=["Once upon a time", "In a galaxy"],
        max_tokens=3,
        n=2,
        extra_body={"ignore_eos": True},
    )
    assert [c.index for c in out.choices] == [0, 1, 2, 3]
    assert out.usage.completion_tokens == 4 * 3
    chat = oai.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=3, n=3
    )
    assert [c.index for c in chat.choices] == [0, 1, 2]
    indices = set()
    for chunk in oai.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=3, n=2, stream=True
    ):
        indices.update(c.index for c in chunk.choices if c.finish_reason)
    assert indices == {0, 1}


def test_constraints_on_v1(http: httpx.Client) -> None:
    body = {"model": MODEL, "prompt": "Year: ", "max_tokens": 8, "regex": r"(19|20)\d\d"}
    out = http.post("/v1/completions", json=body).json()
    assert re.fullmatch(r"(19|20)\d\d", out["choices"][0]["text"]), out
    chat = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Give me a JSON object."}],
        "max_tokens": 12,
        "response_format": {"type": "json_object"},
    }
    # any JSON object: this model's objects run on past a few tokens, so only the start is
    # certain here (a closed object is checked with a bounded schema below)
    text = http.post("/v1/chat/completions", json=chat).json()["choices"][0]["message"]["content"]
    assert text.lstrip().startswith("{"), text
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    chat["response_format"] = {
        "type": "json_schema",
        "json_schema": {"name": "t", "schema": schema},
    }
    chat["max_tokens"] = 40
    choice = http.post("/v1/chat/completions", json=chat).json()["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert isinstance(json.loads(choice["message"]["content"])["ok"], bool)
    both = {**body, "ebnf": 'root ::= "a"'}
    r = http.post("/v1/completions", json=both)
    assert r.status_code == 400 and "Only one of" in r.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"prompt": "x", "logprobs": -1}, "logprobs"),
        ({"prompt": "x", "logprobs": 10**7}, "top_logprobs_num"),
        ({"prompt": "x", "n": 0}, "n must be in"),
    ],
)
def test_bad_v1_logprob_requests_are_400(http: httpx.Client, body: dict, needle: str) -> None:
    r = http.post("/v1/completions", json={"model": MODEL, **body})
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"]["message"]


def test_completions_echo_scores_the_prompt(oai: openai.OpenAI, engine) -> None:  # noqa: ANN001
    ids = engine.encode(PROMPT)
    out = oai.completions.create(
        model=MODEL, prompt=PROMPT, max_tokens=2, temperature=0, logprobs=1, echo=True
    )
    choice = out.choices[0]
    assert choice.text.startswith(PROMPT)
    lp = choice.logprobs
    assert len(lp.tokens) == len(ids) + out.usage.completion_tokens
    assert lp.token_logprobs[0] is None and all(v <= 0 for v in lp.token_logprobs[1:])
    assert lp.top_logprobs[0] is None and len(lp.top_logprobs[1]) == 1
    chunks = list(
        oai.completions.create(
            model=MODEL, prompt=PROMPT, max_tokens=2, temperature=0, echo=True, stream=True
        )
    )
    assert chunks[0].choices[0].text == PROMPT
    assert "".join(c.choices[0].text for c in chunks) == choice.text
    # token ids echo as their text
    by_ids = oai.completions.create(model=MODEL, prompt=ids, max_tokens=1, echo=True)
    assert by_ids.choices[0].text.startswith(PROMPT)
