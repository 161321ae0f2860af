"""One conformance suite for every ``Engine`` backend.

Backends: the embedded engine in-process; ``SGLangEngine`` against the embedded engine's
SGLang-compatible server (uvicorn in a thread); and, when ``SGLANG_URL`` is set (a GPU box),
``SGLangEngine`` against a real SGLang server (``SGLANG_TOKENIZER``: a local tokenizer path;
``SGLANG_PAGE_SIZE``: the server's KV page size, default 1). Answers are a few tokens: the
model decodes at a few tokens per second on this CPU.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.backends import Backend
from support.servers import MODEL, free_port, serving, wait_idle

from engine.base import (
    Engine,
    EngineBusy,
    EngineUnavailable,
    Finished,
    GenerateRequest,
    GenerationStats,
    PromptTooLong,
    SamplingParams,
    TextDelta,
)
from engine.sglang.metrics_scrape import CONTRACT_KEYS, contract_metrics, parse_metrics


def run(eng: Engine, prompt: str, **sampling: object) -> tuple[str, GenerationStats]:
    text, stats = "", None
    for item in eng.generate(GenerateRequest(prompt=prompt, sampling=SamplingParams(**sampling))):
        if isinstance(item, TextDelta):
            assert item.text, "an empty delta"
            text += item.text
        else:
            assert isinstance(item, Finished) and stats is None
            stats = item.stats
    assert stats is not None, "the stream ended without Finished"
    return text, stats


# ---- conformance: every backend ----------------------------------------------------------


def test_streams_deltas_then_stats(backend: Backend) -> None:
    prompt = "The capital of France is"
    text, stats = run(backend.engine, prompt, max_new_tokens=4)
    expected = backend.engine.count_tokens(prompt)
    tolerance = 1 if backend.real_sglang else 0  # SGLang may add a BOS token
    assert expected <= stats.prompt_tokens <= expected + tolerance
    assert 1 <= stats.completion_tokens <= 4
    assert stats.finish_reason in ("stop", "length")
    assert 0.0 <= stats.ttft_s <= stats.e2e_s
    assert text


def test_stop_string_is_honoured(backend: Backend) -> None:
    prompt = "Count: 1, 2, 3, 4, 5, 6, 7, 8, 9,"
    free, _ = run(backend.engine, prompt, max_new_tokens=6)
    assert "," in free  # the model continues the list
    text, stats = run(backend.engine, prompt, max_new_tokens=6, stop=(",",))
    assert text == free[: free.index(",")]
    assert stats.finish_reason == "stop"


def test_ignore_eos_gives_exactly_max_new_tokens(backend: Backend) -> None:
    _, stats = run(backend.engine, "Hi", max_new_tokens=5, ignore_eos=True)
    assert stats.completion_tokens == 5
    assert stats.finish_reason == "length"


def test_seeded_sampling_is_reproducible(backend: Backend) -> None:
    params = {"max_new_tokens": 6, "temperature": 0.9, "top_p": 0.9, "seed": 1234}
    assert (
        run(backend.engine, "Once upon a time", **params)[0]
        == (run(backend.engine, "Once upon a time", **params)[0])
    )


def test_shared_prefix_is_reused(backend: Backend) -> None:
    eng = backend.engine
    prefix = f"Document {uuid.uuid4().hex}. " + (
        "The appliance keeps a radix tree of prompt prefixes so repeated context is reused. " * 36
    )
    shared = eng.count_tokens(prefix)
    assert shared > 500
    page = int(os.environ.get("SGLANG_PAGE_SIZE", "1")) if backend.real_sglang else 1
    _, one = run(eng, prefix + "Question: what is kept?", max_new_tokens=1)
    _, two = run(eng, prefix + "Question: why reuse it?", max_new_tokens=1)
    assert one.cached_tokens < shared
    assert two.cached_tokens >= (shared - 2) // page * page


def test_closing_the_stream_cancels_the_request(backend: Backend) -> None:
    eng = backend.engine
    before = wait_idle(eng)
    request = GenerateRequest(
        prompt="Tell a very long story:",
        sampling=SamplingParams(max_new_tokens=64, ignore_eos=True),
    )
    stream = eng.generate(request)
    assert isinstance(next(item for item in stream if isinstance(item, TextDelta)), TextDelta)
    stream.close()  # type: ignore[attr-defined]  # the reader left
    deadline = time.monotonic() + 10
    while eng.metrics()["num_aborted_requests_total"] <= before["num_aborted_requests_total"]:
        assert time.monotonic() < deadline, "the engine kept generating for a gone reader"
        time.sleep(0.05)
    after = wait_idle(eng)
    assert after["generation_tokens_total"] - before["generation_tokens_total"] < 64
    _, stats = run(eng, "Next:", max_new_tokens=2)
    assert stats.completion_tokens >= 1


def test_prompt_over_the_context_window_raises_eagerly(backend: Backend) -> None:
    context = backend.engine.info().context_length
    request = GenerateRequest(prompt="overflow " * (context + 50))
    with pytest.raises(PromptTooLong):
        backend.engine.generate(request)  # raised before any item is read


def test_health_info_and_metrics(backend: Backend) -> None:
    assert backend.engine.health() is True
    info = backend.engine.info()
    assert info.context_length > 0 and info.model
    # the cache granularity the ordering and prompt layout align to (SGLang: its page size;
    # the embedded engine, also through its SGLang-compatible server: every token)
    assert info.cache_page_tokens >= 1
    if backend.name != "sglang":
        assert info.cache_page_tokens == 1
    metrics = backend.engine.metrics()
    # the embedded engine leaves the two rates to its server (they need scrape history)
    server_side = {"token_usage", "gen_throughput"} if backend.name == "embedded" else set()
    assert set(CONTRACT_KEYS) - server_side <= set(metrics)
    assert metrics["max_total_num_tokens"] > 0


def test_flush_cache_empties_the_prefix_cache(backend: Backend) -> None:
    eng = backend.engine
    prompt = f"Flush {uuid.uuid4().hex}: " + "a prefix worth caching. " * 20
    _, warm = run(eng, prompt, max_new_tokens=1)
    _, warm = run(eng, prompt, max_new_tokens=1)
    assert warm.cached_tokens > 0
    wait_idle(eng)
    eng.flush_cache()
    _, cold = run(eng, prompt, max_new_tokens=1)
    if not backend.real_sglang:  # a real server may be serving others between the two calls
        assert cold.cached_tokens == 0


# ---- a full queue ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_engine(model_dir: Path) -> Iterator[Engine]:
    from engine.embedded.engine import EmbeddedEngine

    small = EmbeddedEngine(model_dir, kv_budget_tokens=4096, max_queue=1, max_running=1)
    yield small
    small.close()


def test_full_queue_raises_busy_eagerly(
    backend: Backend, small_engine: Engine, model_dir: Path
) -> None:
    if backend.real_sglang:
        pytest.skip("a real SGLang server's queue limit is not ours to fill")
    from engine.server.app import build_server_app
    from engine.sglang.client import SGLangEngine

    with serving(build_server_app(small_engine, MODEL)) as url:
        eng = (
            small_engine
            if backend.name == "embedded"
            else SGLangEngine(url, tokenizer=str(model_dir))
        )
        rids, streams, busy = [], [], None
        try:
            for _ in range(8):
                rid = uuid.uuid4().hex
                request = GenerateRequest(
                    prompt="Keep going:",
                    sampling=SamplingParams(max_new_tokens=64, ignore_eos=True),
                    request_id=rid,
                )
                try:
                    streams.append(eng.generate(request))
                except EngineBusy as exc:
                    busy = exc
                    break
                rids.append(rid)
        finally:
            for rid in rids:
                small_engine.abort(rid)
            for stream in streams:
                stream.close()  # type: ignore[attr-defined]
            if eng is not small_engine:
                eng.close()
        assert busy is not None, "the engine never reported a full queue"
        assert busy.retry_after_s > 0
        wait_idle(small_engine)


# ---- the SGLang client only ------------------------------------------------------------------


def test_connection_refused_is_unavailable_after_retries() -> None:
    from engine.sglang.client import SGLangEngine

    client = SGLangEngine(
        f"http://127.0.0.1:{free_port()}", connect_retries=2, retry_backoff_s=0.01
    )
    started = time.monotonic()
    with pytest.raises(EngineUnavailable):
        client.generate(GenerateRequest(input_ids=(1, 2, 3)))
    assert time.monotonic() - started < 5
    assert client.health() is False
    client.close()


def test_server_refusal_of_a_too_long_prompt_is_prompt_too_long(
    server_url: str,
    engine,
    model_dir: Path,  # noqa: ANN001
) -> None:
    from engine.sglang.client import SGLangEngine

    client = SGLangEngine(server_url, tokenizer=str(model_dir), check_context=False)
    ids = tuple([1] * (engine.info().context_length + 10))
    with pytest.raises(PromptTooLong):
        client.generate(GenerateRequest(input_ids=ids))
    client.close()


PROMETHEUS_SAMPLE = """\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="qwen2.5-7b-instruct",tp_rank="0"} 3.0
sglang:num_running_reqs{model_name="qwen2.5-7b-instruct",tp_rank="1"} 2.0
# HELP sglang:cache_hit_rate The prefix cache hit rate.
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="qwen2.5-7b-instruct"} 0.625
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="qwen2.5-7b-instruct"} 128000.0
# HELP sglang:cached_tokens_total Number of cached prompt tokens.
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{model_name="qwen2.5-7b-instruct"} 80000.0
# HELP sglang:num_aborted_requests_total Number of requests aborted.
# TYPE sglang:num_aborted_requests_total counter
sglang:num_aborted_requests_total{model_name="qwen2.5-7b-instruct"} 4.0
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{le="0.1",model_name="qwen2.5-7b-instruct"} 2.0
sglang:time_to_first_token_seconds_bucket{le="0.5",model_name="qwen2.5-7b-instruct"} 9.0
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="qwen2.5-7b-instruct"} 10.0
sglang:time_to_first_token_seconds_sum{model_name="qwen2.5-7b-instruct"} 2.5
sglang:time_to_first_token_seconds_count{model_name="qwen2.5-7b-instruct"} 10.0
# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 1234.0
"""


def test_metrics_scrape_parses_real_format_text() -> None:
    parsed = parse_metrics(PROMETHEUS_SAMPLE)
    assert parsed["num_running_reqs"] == 5.0  # summed over tp ranks
    assert parsed["prompt_tokens_total"] == 128000.0
    assert parsed["cached_tokens_total"] == 80000.0
    assert parsed["num_aborted_requests_total"] == 4.0
    assert parsed["cache_hit_rate"] == 0.625
    assert parsed["time_to_first_token_seconds_sum"] == 2.5
    assert parsed["time_to_first_token_seconds_count"] == 10.0
    assert not any(k.endswith("_bucket") or k.startswith("python_") for k in parsed)
    full = contract_metrics(PROMETHEUS_SAMPLE)
    assert set(CONTRACT_KEYS) <= set(full)
    assert full["generation_tokens_total"] == 0.0  # absent: filled in
    no_rate = "\n".join(line for line in PROMETHEUS_SAMPLE.splitlines() if "cache_hit" not in line)
    assert contract_metrics(no_rate + "\n")["cache_hit_rate"] == pytest.approx(80000 / 128000)


def test_first_line_errors_and_utf8_deltas_as_real_sglang_sends_them() -> None:
    """Real SGLang answers a streamed validation error as HTTP 200 + ``data: {"error"}``, and
    may hold back a cut UTF-8 character as U+FFFD in the cumulative text."""
    import httpx

    from engine.sglang.client import SGLangEngine

    aborted = []

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/abort_request":
            aborted.append(json.loads(request.content)["rid"])
            return httpx.Response(200)
        text = json.loads(request.content)["text"]
        if text == "long":
            lines = ['{"error": {"message": "The input (9000 tokens) is longer than the '
                     "model's context length (8192 tokens).\"}}"]  # fmt: skip
        else:
            meta = {"prompt_tokens": 2, "completion_tokens": 2, "cached_tokens": 0}
            done = meta | {"finish_reason": {"type": "stop", "matched": 2}, "e2e_latency": 0.5}
            lines = [
                json.dumps({"text": "caf\ufffd", "meta_info": meta | {"finish_reason": None}}),
                json.dumps({"text": "café!", "meta_info": done}),
            ]
        body = "".join(f"data: {line}\n\n" for line in lines) + "data: [DONE]\n\n"
        return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})

    client = SGLangEngine("http://sglang.test", check_context=False)
    client._http = httpx.Client(
        base_url="http://sglang.test", transport=httpx.MockTransport(answer)
    )
    with pytest.raises(PromptTooLong):
        next(iter(client.generate(GenerateRequest(prompt="long", request_id="r1"))))
    assert aborted == ["r1"]  # a stream that ends in an error is aborted server-side too
    items = list(client.generate(GenerateRequest(prompt="ok")))
    assert [i.text for i in items if isinstance(i, TextDelta)] == ["caf", "é!"]
    stats = items[-1].stats  # type: ignore[union-attr]
    assert (stats.finish_reason, stats.matched_stop, stats.e2e_s) == ("stop", 2, 0.5)
    client.close()
