"""Test helpers: free loopback ports, an ASGI app served by uvicorn in a thread, and the
appliance CLI run as a real process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from support.processes import free_port


@contextmanager
def serving(app) -> Iterator[str]:  # noqa: ANN001
    """Run ``app`` with uvicorn in a thread; stop it cleanly afterwards. As ``appliance serve``
    does, uvicorn reads no proxy headers (``appliance.wiring.proxy_headers`` decides)."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=5,
        proxy_headers=False,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        assert not thread.is_alive(), "the test server did not stop"


def wait_idle(engine, timeout: float = 20.0) -> dict[str, float]:  # noqa: ANN001
    """Wait until ``engine`` runs and queues nothing; return its metrics then."""
    deadline = time.monotonic() + timeout
    while True:
        m = engine.metrics()
        if m["num_running_reqs"] == 0 and m["num_queue_reqs"] == 0:
            return m
        assert time.monotonic() < deadline, f"the engine did not go idle: {m}"
        time.sleep(0.05)


# ---- the embedded engine's SGLang-compatible server ------------------------------------

MODEL = "smollm2-test"
SAMPLING_NULLS = {"stop": None, "json_schema": None, "sampling_seed": None, "top_k": None}
GAUGES = (
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
    "sglang:num_used_tokens",
    "sglang:token_usage",
    "sglang:cache_hit_rate",
    "sglang:gen_throughput",
    "sglang:max_total_num_tokens",
    "sglang:spec_accept_length",
    "sglang:spec_accept_rate",
)
COUNTERS = (
    "sglang:prompt_tokens_total",
    "sglang:generation_tokens_total",
    "sglang:cached_tokens_total",
    "sglang:num_requests_total",
    "sglang:num_aborted_requests_total",
)
HISTOGRAMS = (
    "sglang:time_to_first_token_seconds",
    "sglang:inter_token_latency_seconds",
    "sglang:e2e_request_latency_seconds",
    "sglang:queue_time_seconds",
)


def data_lines(response: httpx.Response) -> Iterator[str]:
    for line in response.iter_lines():
        if line:
            assert line.startswith("data: "), line
            yield line.removeprefix("data: ")


def generate(http: httpx.Client, **body) -> dict:  # noqa: ANN003
    r = http.post("/generate", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def metric_value(text: str, name: str, suffix: str = "") -> float:
    pattern = rf'^{re.escape(name + suffix)}\{{model_name="{MODEL}"\}} (\S+)$'
    match = re.search(pattern, text, re.MULTILINE)
    assert match, f"{name}{suffix} is missing from /metrics"
    return float(match.group(1))


def api_login(client, appliance, name: str) -> dict:  # noqa: ANN001
    """Bearer headers for ``name`` (created on first use) from ``/api/login`` on ``client``."""
    if appliance.auth.principal_for(name) is None:
        appliance.auth.create_user(name, "password-789")
    token = client.post("/api/login", json={"username": name, "password": "password-789"})
    assert token.status_code == 200
    return {"authorization": f"Bearer {token.json()['token']}"}


def _env() -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    return {**keep, "PYTHONUNBUFFERED": "1"}


class CliProcess:
    """``python -m appliance.cli ARGS`` in a subprocess (without the caller's ``APPLIANCE_*``
    settings); its output is collected, and ``stop`` ends it."""

    def __init__(self, args: list[str]) -> None:
        self.log: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "appliance.cli", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=_env(),
        )
        threading.Thread(target=lambda: self.log.extend(self.proc.stdout), daemon=True).start()

    def wait_for(self, url: str, statuses: tuple[int, ...], timeout: float = 300) -> None:
        deadline = time.time() + timeout
        while True:
            if self.proc.poll() is not None:
                pytest.fail("process exited:\n" + "".join(self.log))
            try:
                if httpx.get(url, timeout=2).status_code in statuses:
                    return
            except httpx.HTTPError:
                pass
            if time.time() > deadline:
                pytest.fail(f"{url} did not answer:\n" + "".join(self.log))
            time.sleep(0.5)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
