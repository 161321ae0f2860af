"""The ordering's cache shadow behind a gateway: how well it predicts the cached tokens the
workers report, under cache-aware routing, for real.

A slice of the ordering workload goes through ``N`` ``engine-server`` workers behind smg
(cache-aware routing), a few sessions at a time, laid out by ``prefix``. Three predictors watch
the same requests; each says, before it learns the report, how many of a request's tokens the
engine will find cached:

- ``one shadow``: one shadow sized at the workers' total KV (what the app runs today);
- ``per-worker, route guessed``: a shadow per worker, and the guess that the gateway sends a
  request to the worker holding its longest prefix (what an app could run without being told);
- ``per-worker, route told``: the same shadows, reading the serving worker from smg's
  ``x-smg-routed-worker-id`` answer header (known once the request is answered; the floor a
  per-worker design could reach).

Each prints its error against the engines' reports, as a share of the prompt tokens.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx

from appliance.bench.ordering.replay import Backend, Messages, Replayer, Served
from appliance.bench.ordering.workload import Turn, Workload
from appliance.wiring.cluster import LocalCluster
from appliance.wiring.cluster_plan import ClusterPlan, plan_cluster
from engine.sglang.gateway import ROUTED_WORKER_HEADER
from rag.ordering import ContextOrdering
from rag.ordering.prefix import PrefixOrdering
from rag.ordering.routed import RoutedPrefixOrdering
from rag.ordering.sent import Sent


@dataclass
class Prediction:
    """One predictor's record over the requests it saw."""

    label: str
    requests: int = 0
    prompt_tokens: int = 0
    reported: int = 0  # cached tokens the engines reported
    predicted: int = 0
    abs_error: int = 0
    routed_right: int = 0  # requests whose serving worker the predictor named
    names_route: bool = False  # whether the predictor names a worker at all

    def add(self, predicted: int, sent: Sent, routed_right: bool = True) -> None:
        self.requests += 1
        self.prompt_tokens += sent.prompt_tokens
        self.reported += sent.cached_tokens
        self.predicted += predicted
        self.abs_error += abs(predicted - sent.cached_tokens)
        self.routed_right += routed_right

    @property
    def error_share(self) -> float:
        """Mean absolute error as a share of the prompt tokens."""
        return self.abs_error / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def bias_share(self) -> float:
        """Over-prediction (positive) or under-prediction, as a share of the prompt tokens."""
        return (self.predicted - self.reported) / self.prompt_tokens if self.prompt_tokens else 0.0


class OneShadowProbe:
    """Notes what ``ours`` (the strategy, with one shadow for all workers) predicted for each
    request, then lets it observe as usual."""

    def __init__(self, ours: PrefixOrdering) -> None:
        self.ours = ours
        self.result = Prediction("one shadow, workers' total")

    def observe(self, sent: Sent) -> None:
        self.result.add(self.ours.predicted_cached(sent.path), sent)
        self.ours.observe(sent)


class PerWorkerProbe:
    """Notes what a shadow per worker (``RoutedPrefixOrdering``) predicted for each request, with
    the route guessed (its ``route``) and told (the worker smg named), then lets it observe."""

    def __init__(self, routed: RoutedPrefixOrdering) -> None:
        self.routed = routed
        self.guessed = Prediction("per-worker, route guessed", names_route=True)
        self.told = Prediction("per-worker, route told")

    def observe(self, sent: Sent) -> None:
        path = sent.path
        guess = self.routed.route(sent.prefix, sent.chunk_ids)
        self.guessed.add(self.routed.predicted_cached(path, guess), sent, guess == sent.worker)
        self.told.add(self.routed.predicted_cached(path, sent.worker), sent)
        self.routed.observe(sent)


def gateway_backend(
    http: httpx.Client, gateway: str, workers: Sequence[str], render_chat: Callable
) -> Backend:
    """One token per request through the gateway (prefill is what is measured); then the
    worker that served it is handed the workload's answer after the prompt, directly, so that
    it holds what it would hold had it generated that answer."""

    def generate(url: str, text: str) -> httpx.Response:
        body = {"text": text, "sampling_params": {"max_new_tokens": 1, "temperature": 0}}
        response = http.post(f"{url}/generate", json=body)
        response.raise_for_status()
        return response

    def serve(messages: Messages, answer: str) -> Served:
        text = render_chat(messages)
        started = time.perf_counter()
        response = generate(gateway, text)
        ttft = time.perf_counter() - started
        meta = response.json()["meta_info"]
        worker = response.headers.get(ROUTED_WORKER_HEADER, "").rstrip("/")
        target = worker if worker in workers else gateway
        taught = generate(target, text + answer).json()["meta_info"]
        prompt = int(meta["prompt_tokens"])
        return Served(
            prompt, int(meta["cached_tokens"]), ttft, int(taught["prompt_tokens"]) - prompt, worker
        )

    return serve


def waves(turns: Sequence[Turn], size: int) -> list[list[Turn]]:
    """``turns`` in waves of at most ``size`` turns of different sessions, in order: a session's
    next turn always waits for the wave holding its previous one."""
    out: list[list[Turn]] = []
    last_wave: dict[int, int] = {}
    for turn in turns:
        first = last_wave.get(turn.session, -1) + 1
        index = next(
            (i for i in range(first, len(out)) if len(out[i]) < size),
            len(out),
        )
        if index == len(out):
            out.append([])
        out[index].append(turn)
        last_wave[turn.session] = index
    return out


@dataclass(frozen=True)
class GatewayShadowResult:
    ordered_by: str  # which predictor's shadow laid the prompts out
    predictions: tuple[Prediction, ...]
    workers: int
    kv_per_worker: int
    requests_per_worker: dict[str, int]
    prompt_tokens: int
    cached_tokens: int

    @property
    def hit_ratio(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


ORDERED_BY = ("one shadow", "per-worker")


def gateway_plan(
    model_dir: Path, workers: int, kv_per_worker: int, port: int, cpus: int
) -> ClusterPlan:
    """``workers`` local workers with ``kv_per_worker`` KV tokens each, behind smg on ``port``
    (the workers on the ports after its metrics port, ``plan_cluster``'s default)."""
    return plan_cluster(
        workers=workers,
        model_dir=model_dir,
        served_model_name=model_dir.name,
        cpus=cpus,
        gateway_port=port,
        worker_env={"APPLIANCE_ENGINE__KV_BUDGET_TOKENS": str(kv_per_worker)},
    )


def measure(
    workload: Workload,
    turns: Sequence[Turn],
    render_chat: Callable,
    *,
    plan: ClusterPlan,
    kv_per_worker: int,
    data_dir: Path,
    concurrency: int = 4,
    ordered_by: str = "per-worker",
) -> GatewayShadowResult:
    """Start ``plan`` (workers holding ``kv_per_worker`` KV tokens each, behind smg), play
    ``turns`` through it, ``concurrency`` sessions at a time, laid out by the ``ordered_by``
    shadow (``ORDERED_BY``), score the three predictors, and stop it."""
    if ordered_by not in ORDERED_BY:
        raise ValueError(f"ordered_by: one of {', '.join(ORDERED_BY)}")
    workers = len(plan.worker_urls)
    cluster = LocalCluster(plan, data_dir)
    cluster.start()
    try:
        one = OneShadowProbe(PrefixOrdering(kv_per_worker * workers))
        per = PerWorkerProbe(RoutedPrefixOrdering(plan.worker_urls, kv_per_worker))
        strategy = one.ours if ordered_by == "one shadow" else per.routed
        ordering = ContextOrdering({"prefix": strategy}, observers=[one, per])
        served: dict[str, int] = {}
        lock = threading.Lock()
        with httpx.Client(timeout=300) as http:
            backend = gateway_backend(http, cluster.gateway_url, plan.worker_urls, render_chat)

            def counted(messages: Messages, answer: str) -> Served:
                result = backend(messages, answer)
                with lock:
                    served[result.worker] = served.get(result.worker, 0) + 1
                return result

            player = Replayer(workload, ordering, "prefix", counted, riders=0)
            with ThreadPoolExecutor(concurrency) as pool:
                for wave in waves(turns, concurrency):
                    list(pool.map(player.play, wave))
    finally:
        cluster.stop()
    out = player.outcome
    return GatewayShadowResult(
        ordered_by,
        (one.result, per.guessed, per.told),
        workers,
        kv_per_worker,
        served,
        out.prompt_tokens,
        out.cached_tokens,
    )


def render_result(result: GatewayShadowResult) -> list[list[str]]:
    """Table rows: laid out by, hit ratio, predictor, requests, reported and predicted cached
    tokens, error, bias, route named."""
    rows = []
    for p in result.predictions:
        rows.append(
            [
                result.ordered_by,
                f"{result.hit_ratio:.3f}",
                p.label,
                str(p.requests),
                f"{p.reported:,}",
                f"{p.predicted:,}",
                f"{100 * p.error_share:.1f}%",
                f"{100 * p.bias_share:+.1f}%",
                f"{p.routed_right}/{p.requests}" if p.names_route else "-",
            ]
        )
    return rows


HEADERS = (
    "laid out by",
    "hit ratio",
    "predictor",
    "requests",
    "cached (reported)",
    "cached (predicted)",
    "abs error / prompt",
    "bias / prompt",
    "route named",
)
