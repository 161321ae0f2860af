"""``mount_admin``: the admin console at ``/admin``, the admin REST API under ``/api/admin``
and the Prometheus ``/metrics`` on the web app. Call it before the chat page is mounted at
``/`` (a mount at ``/`` answers every path registered after it). The console signs in with the
chat page's session (``appliance.web_login``); every handler then checks the admin role."""

from __future__ import annotations

from typing import TYPE_CHECKING

import gradio as gr
from fastapi import FastAPI
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from appliance.api_admin import build_admin_router
from appliance.app_metrics import AppMetrics
from appliance.services.admin import build_admin
from appliance.web_login import gradio_user
from ui.admin.page import build_admin_page
from ui.chat_page import CSS, theme

if TYPE_CHECKING:
    from appliance.app import Appliance


def mount_admin(app: FastAPI, appliance: Appliance) -> None:
    """Wire the console, its API and ``/metrics`` into ``app``; start the metrics sampler."""
    console = build_admin(appliance)
    metrics = appliance.chat.metrics
    if metrics is None:  # built without build_appliance's metrics: count from now on
        metrics = appliance.chat.metrics = AppMetrics(appliance.engine)
    max_upload = appliance.config.rag.max_upload_mb * 1024 * 1024
    app.include_router(build_admin_router(console, max_upload))

    @app.get("/metrics", include_in_schema=False)
    def prometheus_metrics() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    console.sampler.start()
    appliance.on_close.append(console.sampler.stop)
    app.state.admin_console = console  # tests and shutdown reach the sampler here
    gr.mount_gradio_app(
        app,
        build_admin_page(console, appliance.auth),
        path="/admin",
        auth_dependency=gradio_user(appliance.auth),  # the chat page's session cookie
        theme=theme(),
        css=CSS,
        ssr_mode=False,
        footer_links=[],
    )
