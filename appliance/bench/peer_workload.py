"""The side-by-side engine workload, run over HTTP against any OpenAI-compatible completions
server (``/v1/completions`` with token-id prompts, ``ignore_eos`` and streamed usage): our
``appliance engine-server`` and vLLM CPU both take the very same requests.

Every phase starts from a prompt head no earlier request used (a distinct first token), so
"cold" is cold on both servers without relying on a cache-flush endpoint.
"""

from __future__ import annotations

import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx


@dataclass(frozen=True)
class Served:
    ttft_s: float
    e2e_s: float
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class Workload:
    """Token-id prompts for each phase (built once, sent to every server)."""

    warmup: list[int]
    cold: list[list[int]]  # each: its own head + the 1,500-token prefix + a 50-token suffix
    warm: list[int]  # the first cold prompt's head + prefix, another 50-token suffix
    distinct: list[list[int]]  # N prompts that share nothing
    shared: list[list[int]]  # N prompts: one new head + prefix, distinct suffixes
    new_tokens: int


@dataclass(frozen=True)
class PhaseResult:
    wall_s: float
    served: list[Served]

    @property
    def generated(self) -> int:
        return sum(s.completion_tokens for s in self.served)

    @property
    def tokens_per_s(self) -> float:
        return self.generated / self.wall_s

    @property
    def cached(self) -> int:
        return sum(s.cached_tokens for s in self.served)


@dataclass(frozen=True)
class ServerResult:
    cold: list[Served]  # one per cold prompt, in order
    warm: Served
    distinct: PhaseResult
    shared: PhaseResult

    @property
    def cold_ttft_s(self) -> float:
        """The median cold TTFT: one long request alone is a noisy sample on a shared box."""
        return statistics.median(s.ttft_s for s in self.cold)


def model_id(client: httpx.Client, base: str) -> str:
    data = client.get(f"{base}/v1/models", timeout=30).json()
    return data["data"][0]["id"]


def complete(client: httpx.Client, base: str, model: str, ids: list[int], new: int) -> Served:
    """One streamed completion; TTFT is the arrival of the first chunk carrying a choice."""
    body = {
        "model": model,
        "prompt": ids,
        "max_tokens": new,
        "temperature": 0.0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    start = time.perf_counter()
    ttft, usage = None, None
    with client.stream("POST", f"{base}/v1/completions", json=body, timeout=900) as response:
        if response.status_code != 200:
            response.read()
            raise RuntimeError(f"{base}: HTTP {response.status_code}: {response.text[:300]}")
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            if "error" in chunk:
                raise RuntimeError(f"{base}: {chunk['error']}")
            if ttft is None and chunk.get("choices"):
                ttft = time.perf_counter() - start
            if chunk.get("usage"):
                usage = chunk["usage"]
    end = time.perf_counter()
    if usage is None:
        raise RuntimeError(f"{base}: the stream carried no usage")
    details = usage.get("prompt_tokens_details") or {}
    return Served(
        ttft_s=ttft if ttft is not None else end - start,
        e2e_s=end - start,
        prompt_tokens=int(usage["prompt_tokens"]),
        cached_tokens=int(details.get("cached_tokens") or 0),
        completion_tokens=int(usage["completion_tokens"]),
    )


def concurrently(
    client: httpx.Client, base: str, model: str, prompts: list[list[int]], new: int
) -> PhaseResult:
    with ThreadPoolExecutor(max_workers=len(prompts)) as pool:
        start = time.perf_counter()
        served = list(pool.map(lambda ids: complete(client, base, model, ids, new), prompts))
        wall = time.perf_counter() - start
    return PhaseResult(wall_s=wall, served=served)


def run_workload(base: str, work: Workload) -> ServerResult:
    """Run every phase against the server at ``base``, one phase at a time."""
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    with httpx.Client(limits=limits) as client:
        model = model_id(client, base)
        complete(client, base, model, work.warmup, 4)
        cold = [complete(client, base, model, ids, 1) for ids in work.cold]
        warm = complete(client, base, model, work.warm, 1)
        distinct = concurrently(client, base, model, work.distinct, work.new_tokens)
        shared = concurrently(client, base, model, work.shared, work.new_tokens)
    return ServerResult(cold=cold, warm=warm, distinct=distinct, shared=shared)
