"""``/generate`` logprobs, constraints and ``n`` over HTTP, in SGLang's shapes (0.5.23's
``meta_info`` keys), against the embedded engine's server."""

from __future__ import annotations

import json

import httpx
import pytest
from support.servers import metric_value

PROMPT = "The capital of France is Paris. The capital of Germany is"


def generate(http: httpx.Client, **body: object) -> dict | list:
    r = http.post("/generate", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def stream(http: httpx.Client, **body: object) -> list[dict]:
    with http.stream("POST", "/generate", json={**body, "stream": True}) as r:
        assert r.status_code == 200
        lines = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def is_triple(entry: list, with_text: bool) -> bool:
    logprob, token_id, text = entry
    return (
        (logprob is None or isinstance(logprob, float))
        and isinstance(token_id, int)
        and (isinstance(text, str) if with_text else text is None)
    )


def test_generate_returns_sglangs_logprob_keys(http: httpx.Client, engine) -> None:  # noqa: ANN001
    ids = engine.encode(PROMPT)
    out = generate(
        http,
        text=PROMPT,
        sampling_params={"max_new_tokens": 4, "temperature": 0},
        return_logprob=True,
        logprob_start_len=0,
        top_logprobs_num=2,
        token_ids_logprob=[5, 28],
        return_text_in_logprobs=True,
    )
    meta = out["meta_info"]
    inputs, outputs = meta["input_token_logprobs"], meta["output_token_logprobs"]
    assert [e[1] for e in inputs] == ids and inputs[0][0] is None
    assert all(is_triple(e, True) for e in inputs + outputs)
    assert len(outputs) == meta["completion_tokens"] == meta["output_token_logprobs_length"]
    assert "".join(e[2] for e in outputs) == out["text"]
    assert meta["input_top_logprobs"][0] is None and meta["input_token_ids_logprobs"][0] is None
    for row in meta["input_top_logprobs"][1:] + meta["output_top_logprobs"]:
        assert len(row) == 2 and row[0][0] >= row[1][0] and all(is_triple(e, True) for e in row)
    for row in meta["input_token_ids_logprobs"][1:] + meta["output_token_ids_logprobs"]:
        assert [e[1] for e in row] == [5, 28]
    for entry, top in zip(outputs, meta["output_top_logprobs"], strict=True):
        assert top[0][1] == entry[1]  # greedy: the chosen token is the best one


def test_keys_and_texts_appear_only_when_asked(http: httpx.Client) -> None:
    meta = generate(http, text=PROMPT, sampling_params={"max_new_tokens": 2})["meta_info"]
    assert not any("logprob" in key for key in meta)
    meta = generate(http, text=PROMPT, sampling_params={"max_new_tokens": 2}, return_logprob=True)[
        "meta_info"
    ]
    assert meta["input_token_logprobs"] == []  # logprob_start_len defaults to -1
    assert all(is_triple(e, False) for e in meta["output_token_logprobs"])
    assert "output_top_logprobs" not in meta and "output_token_ids_logprobs" not in meta


def test_streamed_logprob_lists_are_cumulative_and_end_as_unstreamed(http: httpx.Client) -> None:
    body = {
        "text": PROMPT,
        "sampling_params": {"max_new_tokens": 6, "temperature": 0, "ignore_eos": True},
        "return_logprob": True,
        "logprob_start_len": 3,
        "top_logprobs_num": 1,
    }
    whole = generate(http, **body)["meta_info"]
    lines = stream(http, **body)
    lengths = [len(line["meta_info"]["output_token_logprobs"]) for line in lines]
    assert lengths == sorted(lengths) and lengths[-1] == 6
    final = lines[-1]["meta_info"]
    for key in ("input_token_logprobs", "output_token_logprobs", "output_top_logprobs"):
        assert [e[1] for e in _flat(final[key])] == [e[1] for e in _flat(whole[key])]
        for a, b in zip(_flat(final[key]), _flat(whole[key]), strict=True):
            assert a[0] == pytest.approx(b[0], abs=0.05) if a[0] is not None else b[0] is None


def _flat(rows: list) -> list:
    return [e for row in rows for e in (row if isinstance(row[0], list) else [row])]


def test_prefill_only_scoring_and_batches(http: httpx.Client, engine) -> None:  # noqa: ANN001
    texts = [PROMPT + " Berlin", PROMPT + " Munich"]
    out = generate(http, text=texts, sampling_params={"max_new_tokens": 0}, return_logprob=True)
    assert isinstance(out, list) and len(out) == 2
    for text, answer in zip(texts, out, strict=True):
        meta = answer["meta_info"]
        assert answer["text"] == "" and meta["completion_tokens"] == 0
        assert meta["output_token_logprobs"] == []
        # prefill-only scoring without a start scores the whole prompt
        assert [e[1] for e in meta["input_token_logprobs"]] == engine.encode(text)
    berlin, munich = (sum(e[0] for e in a["meta_info"]["input_token_logprobs"][1:]) for a in out)
    assert berlin > munich


def test_n_samples_share_one_prefill(http: httpx.Client, engine) -> None:  # noqa: ANN001
    http.post("/flush_cache")
    prompt = PROMPT + " And the capital of Italy is" * 8
    n_tokens = engine.count_tokens(prompt)
    before = http.get("/metrics").text
    out = generate(
        http,
        text=prompt,
        sampling_params={"max_new_tokens": 4, "temperature": 1.0, "n": 4, "ignore_eos": True},
    )
    after = http.get("/metrics").text
    assert isinstance(out, list) and len(out) == 4
    assert len({a["meta_info"]["id"] for a in out}) == 4
    assert all(a["meta_info"]["cached_tokens"] == n_tokens - 1 for a in out)

    def computed(text: str) -> float:
        return metric_value(text, "sglang:prompt_tokens_total") - metric_value(
            text, "sglang:cached_tokens_total"
        )

    # one prefill of the prompt (the warm-up), then one token per sample
    assert computed(after) - computed(before) == n_tokens + 4


def test_streamed_batch_and_n_carry_their_index(http: httpx.Client) -> None:
    lines = stream(
        http,
        text=["One, two,", "Red, green,"],
        sampling_params={"max_new_tokens": 3, "n": 2, "temperature": 0.5, "ignore_eos": True},
    )
    finals = {line["index"]: line for line in lines if line["meta_info"]["finish_reason"]}
    assert sorted(finals) == [0, 1, 2, 3]
    assert all(f["meta_info"]["completion_tokens"] == 3 for f in finals.values())


def test_regex_and_ebnf_over_http(http: httpx.Client) -> None:
    out = generate(
        http, text="Date: ", sampling_params={"max_new_tokens": 12, "regex": r"\d{4}-\d{2}"}
    )
    assert __import__("re").fullmatch(r"\d{4}-\d{2}", out["text"]), out["text"]
    out = generate(
        http,
        text="Yes or no?",
        sampling_params={"max_new_tokens": 4, "ebnf": 'root ::= "yes" | "no"'},
    )
    assert out["text"] in ("yes", "no")
    assert out["meta_info"]["finish_reason"]["type"] == "stop"


def test_n_beyond_what_the_engine_holds_is_a_clear_400(http: httpx.Client, engine) -> None:  # noqa: ANN001
    capacity = engine.info().max_requests
    body = {"text": "x", "sampling_params": {"max_new_tokens": 1, "n": capacity + 1}}
    r = http.post("/generate", json=body)
    assert r.status_code == 400 and "ask for fewer samples" in r.json()["error"]["message"]
