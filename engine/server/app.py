"""``build_server_app``: the SGLang-compatible HTTP server around any ``Engine``.

Routes: native (``/generate``, ``/health``, ``/health_generate``, ``/model_info``,
``/get_model_info``, ``/server_info``, ``/get_server_info``, ``/flush_cache``,
``/abort_request``), OpenAI (``/v1/chat/completions``, ``/v1/completions``, ``/v1/models``) and
``/metrics``. No interactive docs: the appliance runs air-gapped.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from engine.base import Engine
from engine.server.control import build_control_router
from engine.server.errors import install_error_handlers
from engine.server.metrics import ServerMetrics
from engine.server.native import build_native_router
from engine.server.openai_api import build_openai_router
from engine.server.running import Runner


def build_server_app(engine: Engine, served_model_name: str) -> FastAPI:
    app = FastAPI(
        title="appliance engine server (SGLang-compatible)",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    metrics = ServerMetrics(engine, served_model_name)
    runner = Runner(engine, metrics)
    install_error_handlers(app)
    app.include_router(build_native_router(engine, runner))
    app.include_router(build_control_router(engine, runner, metrics, served_model_name))
    app.include_router(build_openai_router(engine, runner, served_model_name))

    @app.get("/metrics")
    def prometheus_metrics() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    app.state.runner = runner
    app.state.metrics = metrics
    return app
