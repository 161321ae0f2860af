"""Engine status for the admin console: backend, model, profile, launch arguments, health,
and the audited cache flush."""

from __future__ import annotations

import contextlib
from dataclasses import asdict

import httpx

from appliance.core.config import AppConfig
from appliance.core.db.models import AuditEvent
from appliance.core.db.session import Database
from engine.base import Engine, EngineError
from engine.sglang.gateway import default_metrics_url
from engine.sglang.gateway_status import read_gateway

# SGLang server arguments worth showing (from its /get_server_info), in this order
SGLANG_ARGS = (
    "model_path",
    "served_model_name",
    "tp_size",
    "dp_size",
    "context_length",
    "mem_fraction_static",
    "max_running_requests",
    "chunked_prefill_size",
    "max_total_tokens",
    "schedule_policy",
    "radix_eviction_policy",
    "enable_hierarchical_cache",
    "hicache_ratio",
    "hicache_size",
    "hicache_write_policy",
    "page_size",
    "speculative_algorithm",
    "speculative_num_draft_tokens",
    "grammar_backend",
    "kv_cache_dtype",
    "dtype",
)


# the gateway's own counters worth showing (smg 1.13.0 names, ``smg_`` removed)
GATEWAY_METRICS = (
    "router_requests_total",
    "router_request_errors_total",
    "worker_retries_total",
    "worker_retries_exhausted_total",
    "worker_health_checks_total",
    "worker_cb_transitions_total",
)


def cached_by_source(metrics: dict[str, float]) -> dict[str, float]:
    """Prompt tokens served from GPU (``device``) and host RAM (``host``, HiCache), and from
    HiCache storage where used, as SGLang labels ``cached_tokens_total``; empty when it does
    not (``engine.sglang.metrics_scrape``)."""
    out = {s: metrics.get(f"cached_tokens_{s}_total") for s in ("device", "host", "storage")}
    if out["device"] is None:
        return {}
    return {s: v for s, v in out.items() if v is not None and (v or s != "storage")}


def gateway_summary(url: str, workers: tuple[str, ...], metrics_url: str) -> dict:
    """The gateway and each worker for the engine tab: health from the gateway, queue,
    running requests, KV usage and cache hit rate from each worker's ``/metrics``, and the
    gateway's own counters."""
    state = read_gateway(url, workers, metrics_url)
    rows = []
    for w in state.workers:
        m = w.metrics
        rows.append(
            {
                "url": w.url,
                "healthy": w.healthy,
                "status": w.status,
                "running": m.get("num_running_reqs"),
                "queue": m.get("num_queue_reqs"),
                "kv_usage": m.get("token_usage"),
                "cache_hit_rate": m.get("cache_hit_rate"),
                "cached_by_source": cached_by_source(m),
                "error": w.error,
            }
        )
    return {
        "url": state.url,
        "reachable": state.reachable,
        "ready": state.ready,
        "error": state.error,
        "workers": rows,
        "metrics": {k: state.metrics[k] for k in GATEWAY_METRICS if k in state.metrics},
    }


def speculation(metrics: dict[str, float]) -> dict:
    """``{"speculation": {accept_rate, accept_length}}`` from an engine's metrics (SGLang's
    gauges, the embedded engine's since start), or ``{}`` before any draft was verified."""
    length = metrics.get("spec_accept_length", 0.0)
    if not length:
        return {}
    return {
        "speculation": {
            "accept_rate": metrics.get("spec_accept_rate", 0.0),
            "accept_length": length,
        }
    }


class EngineStatus:
    def __init__(self, engine: Engine, config: AppConfig, db: Database) -> None:
        self.engine = engine
        self.config = config
        self.db = db

    def status(self) -> dict:
        """What runs and how it was launched; never raises (an unreachable engine is a
        status, with the reason)."""
        out: dict = {"healthy": False, "error": ""}
        try:
            out.update(asdict(self.engine.info()))
            out["healthy"] = bool(self.engine.health())
        except EngineError as exc:
            out.update(backend=self.config.engine.backend, error=str(exc))
        out["launch"] = self.launch_args()
        e = self.config.engine
        if not e.sglang_worker_urls:  # one engine
            with contextlib.suppress(EngineError):  # unreachable: already the status's error
                metrics = self.engine.metrics()
                out.update(speculation(metrics))  # its speculation record, once it has one
                if e.backend == "sglang":
                    out["cached_by_source"] = cached_by_source(metrics)
        if e.backend == "sglang" and e.sglang_worker_urls:
            metrics = e.gateway_metrics_url or default_metrics_url(e.sglang_url)
            out["gateway"] = gateway_summary(e.sglang_url, e.sglang_worker_urls, metrics)
        return out

    def launch_args(self) -> dict[str, object]:
        e = self.config.engine
        if e.backend == "embedded":
            return {
                "model_path": e.model_path or "(bundled SmolLM2-135M-Instruct)",
                "dtype": e.dtype,
                "threads": e.threads or "torch default",
                "native_attention": e.native_attention,
                "kv_budget_tokens": e.kv_budget_tokens,
                "max_running_requests": e.max_running_requests,
                "max_queue": e.max_queue,
                "max_new_tokens": e.max_new_tokens,
                "speculative_algorithm": e.speculative_algorithm,
                "speculative_num_draft_tokens": e.speculative_num_draft_tokens,
                "speculative_pool_tokens": e.speculative_pool_tokens,
            }
        args: dict[str, object] = {"sglang_url": e.sglang_url}
        if e.sglang_worker_urls:
            args["workers"] = ", ".join(e.sglang_worker_urls)
        try:
            info = httpx.get(f"{e.sglang_url.rstrip('/')}/get_server_info", timeout=5).json()
        except (httpx.HTTPError, ValueError) as exc:
            args["server_info"] = f"unavailable: {exc}"
            return args
        if isinstance(info, dict):
            args.update({k: info[k] for k in SGLANG_ARGS if k in info})
        return args

    def flush_cache(self, actor: str) -> None:
        """Drop the engine's prefix cache (audited). Raises ``EngineError`` when refused."""
        self.engine.flush_cache()
        with self.db.session() as s:
            s.add(AuditEvent(actor=actor, action="admin.engine.flush_cache", detail=None))
