"""Continuous batching in the embedded engine: concurrent requests decode together, give the
same greedy text as one at a time, and a request can join or leave a running batch."""

from __future__ import annotations

import threading
import time

import pytest

from engine.base import Finished, GenerateRequest, SamplingParams, TextDelta

PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village near the mountains, there lived",
    "1, 2, 3, 4,",
    "Our VPN password rules are simple:",
]


def collect(engine, request: GenerateRequest) -> tuple[str, Finished]:  # noqa: ANN001
    text, final = "", None
    for item in engine.generate(request):
        if isinstance(item, TextDelta):
            text += item.text
        else:
            final = item
    return text, final


def run_concurrently(engine, requests: list[GenerateRequest]) -> list[tuple[str, Finished]]:  # noqa: ANN001
    results: list = [None] * len(requests)

    def work(i: int) -> None:
        results[i] = collect(engine, requests[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    return results


@pytest.fixture(scope="module")
def fp32_engine(model_dir):  # noqa: ANN001, ANN201
    """float32, so batched and single-row matmuls agree bit for bit on greedy choices."""
    from engine.embedded.engine import EmbeddedEngine

    eng = EmbeddedEngine(model_dir, dtype="float32", max_running=4)
    yield eng
    eng.close()


def test_batched_greedy_text_equals_one_at_a_time(fp32_engine) -> None:  # noqa: ANN001
    requests = [
        GenerateRequest(prompt=p, sampling=SamplingParams(10, ignore_eos=True)) for p in PROMPTS
    ]
    alone = [collect(fp32_engine, r)[0] for r in requests]
    fp32_engine.flush_cache()
    together = run_concurrently(fp32_engine, requests)
    assert [t for t, _ in together] == alone
    assert all(f.stats.completion_tokens == 10 for _, f in together)


def test_requests_share_decode_steps(engine) -> None:  # noqa: ANN001
    peak = 0
    stop = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, int(engine.metrics()["num_running_reqs"]))
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    requests = [
        GenerateRequest(prompt=p, sampling=SamplingParams(16, ignore_eos=True)) for p in PROMPTS
    ]
    results = run_concurrently(engine, requests)
    stop.set()
    watcher.join()
    assert peak >= 2
    assert all(f.stats.completion_tokens == 16 for _, f in results)


def test_a_request_leaving_early_does_not_disturb_the_others(fp32_engine) -> None:  # noqa: ANN001
    long = GenerateRequest(prompt=PROMPTS[1], sampling=SamplingParams(14, ignore_eos=True))
    short = GenerateRequest(prompt=PROMPTS[0], sampling=SamplingParams(3, ignore_eos=True))
    expected = collect(fp32_engine, long)[0]
    fp32_engine.flush_cache()
    results = run_concurrently(fp32_engine, [long, short, short])
    assert results[0][0] == expected
    assert results[1][1].stats.completion_tokens == 3


def test_waiting_requests_with_the_longest_cached_prefix_go_first(model_dir) -> None:  # noqa: ANN001
    from engine.embedded.engine import EmbeddedEngine

    serial = EmbeddedEngine(model_dir, max_running=1)
    try:
        shared = "Policy handbook, chapter on passwords and VPN access. " * 20
        collect(serial, GenerateRequest(prompt=shared + "Q1", sampling=SamplingParams(1)))
        finished: list[str] = []

        def work(name: str, prompt: str, n: int) -> None:
            request = GenerateRequest(prompt=prompt, sampling=SamplingParams(n, ignore_eos=True))
            collect(serial, request)
            finished.append(name)

        blocker = threading.Thread(target=work, args=("blocker", "Tell me a story.", 12))
        blocker.start()
        while serial.metrics()["num_running_reqs"] < 1:
            time.sleep(0.01)
        cold = threading.Thread(target=work, args=("cold", "An unrelated question?", 2))
        cold.start()
        while serial.metrics()["num_queue_reqs"] < 1:
            time.sleep(0.01)
        warm = threading.Thread(target=work, args=("warm", shared + "Q2", 2))
        warm.start()
        for t in (blocker, cold, warm):
            t.join(timeout=300)
        # "warm" arrived last but shares a cached prefix, so it was admitted before "cold"
        assert finished == ["blocker", "warm", "cold"]
    finally:
        serial.close()


def test_concurrent_requests_sharing_a_new_prefix_compute_it_once(engine) -> None:  # noqa: ANN001
    import uuid

    prefix = f"Ticket {uuid.uuid4().hex}. " + "The VPN gateway rotates keys nightly. " * 60
    requests = [
        GenerateRequest(prompt=prefix + q, sampling=SamplingParams(2))
        for q in ("Who rotates keys?", "When are keys rotated?", "Which gateway?")
    ]
    prefix_tokens = len(engine.encode(prefix))
    results = run_concurrently(engine, requests)
    cached = sorted(f.stats.cached_tokens for _, f in results)
    # the first computes the prefix; the others wait for it and reuse it
    assert cached[0] < 10
    assert all(c >= prefix_tokens - 2 for c in cached[1:])
