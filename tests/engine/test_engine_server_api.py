"""The SGLang-compatible engine server over real HTTP: uvicorn on a free port in a thread, the
real embedded engine (SmolLM2-135M on the CPU), httpx and the official ``openai`` client.

Answers are kept to a few tokens: the model decodes at a few tokens per second here.
This file: the OpenAI routes, control endpoints, metrics and admission.
"""

from __future__ import annotations

import inspect
import json
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from support.servers import (
    COUNTERS,
    GAUGES,
    HISTOGRAMS,
    MODEL,
    data_lines,
    generate,
    metric_value,
    serving,
    wait_idle,
)

# ---- OpenAI API with the official client -------------------------------------------------


def test_openai_chat_completions(oai) -> None:  # noqa: ANN001
    messages = [{"role": "user", "content": f"Say hello. ({uuid.uuid4().hex[:8]})"}]
    out = oai.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=4, temperature=0, seed=7
    )
    assert out.object == "chat.completion" and out.model == MODEL
    choice = out.choices[0]
    assert choice.message.role == "assistant" and isinstance(choice.message.content, str)
    assert choice.finish_reason in ("stop", "length")
    usage = out.usage
    assert usage.prompt_tokens > 0 and 1 <= usage.completion_tokens <= 4
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens_details.cached_tokens >= 0

    stream = oai.chat.completions.create(
        model=MODEL,
        messages=messages,
        max_tokens=4,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] in ("stop", "length") and not any(finishes[:-1])
    assert all(c.id == chunks[0].id for c in chunks)
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    # the same conversation again: (most of) its prompt is in the cache
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens >= usage.prompt_tokens // 2


def test_openai_chat_json_schema(oai, engine) -> None:  # noqa: ANN001
    if not getattr(engine, "supports_json_schema", False):
        pytest.skip("the embedded engine does not constrain output to a JSON schema yet")
    schema = {
        "type": "object",
        "properties": {"colour": {"enum": ["red", "green", "blue"]}},
        "required": ["colour"],
        "additionalProperties": False,
    }
    out = oai.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Name a colour as JSON."}],
        max_tokens=24,
        temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": schema}},
    )
    value = json.loads(out.choices[0].message.content)
    assert value["colour"] in ("red", "green", "blue")
    assert out.choices[0].finish_reason == "stop"


def test_openai_completions_stream_and_models(oai) -> None:  # noqa: ANN001
    chunks = list(
        oai.completions.create(
            model=MODEL,
            prompt="Monday, Tuesday,",
            max_tokens=4,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks and all(isinstance(c.choices[0].text, str) for c in chunks)
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens >= 1
    assert "".join(c.choices[0].text for c in chunks)

    models = oai.models.list()
    assert [m.id for m in models.data] == [MODEL]


def test_openai_errors_use_openai_shape(http: httpx.Client) -> None:
    r = http.post("/v1/chat/completions", json={"model": MODEL, "messages": [], "n": 1})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and "messages" in err["message"]
    r = http.post("/v1/completions", json={"model": MODEL, "prompt": "x", "n": 65})
    assert r.status_code == 400 and "n must be in" in r.json()["error"]["message"]


# ---- health, info, cache, abort ----------------------------------------------------------


def test_health_and_info_endpoints(http: httpx.Client, engine, model_dir: Path) -> None:  # noqa: ANN001
    assert http.get("/health").status_code == 200
    assert http.get("/health_generate").status_code == 200
    for path in ("/get_model_info", "/model_info"):
        info = http.get(path).json()
        assert info["model_path"] == str(model_dir)
        assert info["tokenizer_path"] == str(model_dir)
        assert info["is_generation"] is True
    for path in ("/get_server_info", "/server_info"):
        info = http.get(path).json()
        assert info["context_length"] == engine.info().context_length
        assert info["backend"] == "embedded"
        assert info["max_queued_requests"] == engine.max_queue
        assert info["max_total_num_tokens"] > 0
        assert info["served_model_name"] == MODEL
        assert info["page_size"] == 1  # SGLang's name for the prefix-cache granularity


def test_flush_cache_empties_the_prefix_cache(http: httpx.Client, engine) -> None:  # noqa: ANN001
    text = f"Flush test {uuid.uuid4().hex}: the cache should forget this sentence."
    params = {"max_new_tokens": 0}
    generate(http, text=text, sampling_params=params)
    warm = generate(http, text=text, sampling_params=params)["meta_info"]
    assert warm["cached_tokens"] > 0
    wait_idle(engine)
    r = http.post("/flush_cache", params={"timeout": 5})
    assert r.status_code == 200, r.text
    cold = generate(http, text=text, sampling_params=params)["meta_info"]
    assert cold["cached_tokens"] == 0


def test_abort_request_ends_the_stream_with_abort(http: httpx.Client, engine) -> None:  # noqa: ANN001
    rid = f"abort-{uuid.uuid4().hex}"
    body = {
        "text": "Count slowly:",
        "rid": rid,
        "stream": True,
        "sampling_params": {"max_new_tokens": 64, "ignore_eos": True, "temperature": 0},
    }
    with http.stream("POST", "/generate", json=body) as r:
        lines = data_lines(r)
        first = json.loads(next(lines))
        assert first["meta_info"]["id"] == rid
        aborted = http.post("/abort_request", json={"rid": rid})
        assert aborted.status_code == 200
        rest = list(lines)
    assert rest[-1] == "[DONE]"
    final = json.loads(rest[-2])["meta_info"]
    assert final["finish_reason"]["type"] == "abort"
    assert final["completion_tokens"] < 64
    wait_idle(engine)


def test_client_disconnect_cancels_the_request(http: httpx.Client, base: str, engine) -> None:  # noqa: ANN001
    before = wait_idle(engine)
    body = {
        "text": "Tell a very long story:",
        "stream": True,
        "sampling_params": {"max_new_tokens": 64, "ignore_eos": True, "temperature": 0},
    }
    with (
        httpx.Client(base_url=base, timeout=60) as other,
        other.stream("POST", "/generate", json=body) as r,
    ):
        assert r.status_code == 200
        next(data_lines(r))  # running now; then hang up
    deadline = time.monotonic() + 20
    while engine.metrics()["num_aborted_requests_total"] <= before["num_aborted_requests_total"]:
        assert time.monotonic() < deadline, "the engine kept generating for a gone client"
        time.sleep(0.05)
    after = wait_idle(engine)
    assert after["generation_tokens_total"] - before["generation_tokens_total"] < 64
    out = generate(http, text="Next:", sampling_params={"max_new_tokens": 2, "temperature": 0})
    assert out["meta_info"]["finish_reason"] is not None


# ---- metrics ------------------------------------------------------------------------------


def test_metrics_expose_sglang_names(http: httpx.Client, engine) -> None:  # noqa: ANN001
    wait_idle(engine)
    r = http.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    before = r.text
    for name in GAUGES:
        assert f"# TYPE {name} gauge" in before
        metric_value(before, name)
    for name in COUNTERS:
        assert f"# TYPE {name} counter" in before
        assert f'{name}{{model_name="{MODEL}"}}' in before
    for name in HISTOGRAMS:
        assert f"# TYPE {name} histogram" in before
        assert f'{name}_bucket{{le="+Inf",model_name="{MODEL}"}}' in before
        metric_value(before, name, "_count")
    assert "_total_total" not in before
    assert (
        metric_value(before, "sglang:max_total_num_tokens")
        == engine.metrics()["max_total_num_tokens"]
    )

    generate(http, text="Metrics:", sampling_params={"max_new_tokens": 3, "ignore_eos": True})
    after = http.get("/metrics").text
    for name in ("sglang:prompt_tokens_total", "sglang:num_requests_total"):
        assert metric_value(after, name) > metric_value(before, name)
    assert (
        metric_value(after, "sglang:generation_tokens_total")
        >= metric_value(before, "sglang:generation_tokens_total") + 3
    )
    for name in HISTOGRAMS:
        assert metric_value(after, name, "_count") > metric_value(before, name, "_count")
    assert 0.0 < metric_value(after, "sglang:token_usage") <= 1.0
    assert metric_value(after, "sglang:gen_throughput") > 0.0


# ---- a full queue -------------------------------------------------------------------------


def test_full_queue_is_503_with_retry_after(model_dir: Path) -> None:
    from engine.embedded.engine import EmbeddedEngine
    from engine.server.app import build_server_app

    # one running request and one waiting fill it (where the engine lets us cap running ones)
    capped = "max_running" in inspect.signature(EmbeddedEngine).parameters
    small = EmbeddedEngine(
        model_dir, kv_budget_tokens=4096, max_queue=1, **({"max_running": 1} if capped else {})
    )
    body = {
        "text": "Keep going:",
        "stream": True,
        "sampling_params": {"max_new_tokens": 64, "ignore_eos": True, "temperature": 0},
    }
    try:
        with (
            serving(build_server_app(small, MODEL)) as url,
            httpx.Client(base_url=url, timeout=60) as client,
            ExitStack() as open_streams,
        ):
            refused = None
            for _ in range(12):
                r = open_streams.enter_context(client.stream("POST", "/generate", json=body))
                if r.status_code == 503:
                    refused = r
                    break
                assert r.status_code == 200
            assert refused is not None, "the engine never reported a full queue"
            refused.read()
            assert int(refused.headers["Retry-After"]) >= 1
            assert "busy" in refused.json()["error"]["message"]
            assert client.post("/abort_request", json={"abort_all": True}).status_code == 200
    finally:
        small.close()
