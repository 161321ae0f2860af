"""SGLang's native control routes: health, model and server info, cache flush, abort.

``/health_generate`` runs a real one-token generation and answers 503 when it fails or takes
longer than ``HEALTH_TIMEOUT_S``. ``/flush_cache`` is refused (400) while requests run or
wait, as in SGLang; ``?timeout=`` (seconds, default 1) is how long to wait for them to finish.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict

from engine.base import Engine, EngineError, GenerateRequest, SamplingParams
from engine.server.metrics import ServerMetrics
from engine.server.running import Runner, collect, new_rid

HEALTH_TIMEOUT_S = 20.0
FLUSH_DEFAULT_TIMEOUT_S = 1.0
FLUSHED = (
    "Cache flushed.\nPlease check backend logs for more details. (When there are running or "
    "waiting requests, the operation will not be performed.)\n"
)


class AbortBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    rid: str | None = ""
    abort_all: bool | None = False


def _model_path(engine: Engine) -> str:
    path = getattr(engine, "model_dir", None)
    return str(path) if isinstance(path, str | Path) else engine.info().model


def _busy(engine: Engine) -> bool:
    m = engine.metrics()
    return m.get("num_running_reqs", 0.0) + m.get("num_queue_reqs", 0.0) > 0


def _generates(runner: Runner) -> bool:
    """One greedy token, bounded in time; a late or failed generation is unhealthy."""
    rid = f"HEALTH_CHECK_{new_rid()}"
    request = GenerateRequest(
        prompt="Hello", sampling=SamplingParams(max_new_tokens=1), request_id=rid
    )
    outcome: list[bool] = []

    def run() -> None:
        try:
            result = collect(runner.start(request))
            outcome.append(result.stats.finish_reason != "abort")
        except Exception:
            outcome.append(False)

    worker = threading.Thread(target=run, name="health-generate", daemon=True)
    worker.start()
    worker.join(HEALTH_TIMEOUT_S)
    if worker.is_alive():
        runner.abort(rid)
        return False
    return bool(outcome and outcome[0])


def _model_info(engine: Engine, served_model_name: str) -> dict:
    path = _model_path(engine)
    return {
        "model_path": path,
        "tokenizer_path": path,
        "is_generation": True,
        "served_model_name": served_model_name,
        "preferred_sampling_params": None,
        "weight_version": "default",
    }


def _server_info(engine: Engine, metrics: ServerMetrics, served_model_name: str) -> dict:
    info = engine.info()
    m = engine.metrics()
    path = _model_path(engine)
    return {
        "model_path": path,
        "tokenizer_path": path,
        "served_model_name": served_model_name,
        "context_length": info.context_length,
        "max_total_num_tokens": int(m.get("max_total_num_tokens", 0)),
        "max_running_requests": getattr(engine, "max_running_requests", None),
        "max_queued_requests": getattr(engine, "max_queue", None),
        "backend": info.backend,
        "profile": info.profile,
        "dtype": info.dtype,
        "page_size": info.cache_page_tokens,
        "disable_radix_cache": False,
        "version": "appliance-embedded",
        "internal_states": [
            {
                "last_gen_throughput": metrics.gen_throughput(),
                "num_running_reqs": int(m.get("num_running_reqs", 0)),
                "num_queue_reqs": int(m.get("num_queue_reqs", 0)),
                "cache_hit_rate": m.get("cache_hit_rate", 0.0),
            }
        ],
    }


def _flush(engine: Engine, timeout: float) -> Response:
    """Flush once nothing runs or waits, waiting up to ``timeout`` s for that (else 400)."""
    deadline = time.monotonic() + max(0.0, timeout)
    while _busy(engine):
        if time.monotonic() >= deadline:
            return PlainTextResponse(
                "Cache not flushed: requests are running or waiting.\n", status_code=400
            )
        time.sleep(0.02)
    try:
        engine.flush_cache()
    except EngineError as exc:
        return PlainTextResponse(f"Cache not flushed: {exc}\n", status_code=500)
    return PlainTextResponse(FLUSHED)


def build_control_router(
    engine: Engine, runner: Runner, metrics: ServerMetrics, served_model_name: str
) -> APIRouter:
    """The control routes (see the module docstring) over one engine and its runner."""
    router = APIRouter()

    @router.get("/health")
    def health() -> Response:
        return Response(status_code=200 if engine.health() else 503)

    @router.get("/health_generate")
    def health_generate() -> Response:
        ok = engine.health() and _generates(runner)
        return Response(status_code=200 if ok else 503)

    def model_info() -> dict:
        return _model_info(engine, served_model_name)

    def server_info() -> dict:
        return _server_info(engine, metrics, served_model_name)

    for path in ("/model_info", "/get_model_info"):
        router.add_api_route(path, model_info, methods=["GET"])
    for path in ("/server_info", "/get_server_info"):
        router.add_api_route(path, server_info, methods=["GET"])

    @router.api_route("/flush_cache", methods=["GET", "POST"])
    def flush_cache(timeout: float = FLUSH_DEFAULT_TIMEOUT_S) -> Response:
        return _flush(engine, timeout)

    @router.post("/abort_request")
    def abort_request(body: AbortBody) -> JSONResponse:
        if body.abort_all:
            return JSONResponse({"aborted": runner.abort_all()})
        found = bool(body.rid) and runner.abort(body.rid or "")
        return JSONResponse({"rid": body.rid, "aborted": int(found)})

    return router
