"""``mount_metrics``: Prometheus ``/metrics`` on the web app, and the sampler that feeds the
admin console's live charts (started here, stopped by ``Appliance.close``)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from appliance.core.metrics import AppMetrics
from appliance.core.services.admin.sampler import MetricsSampler
from appliance.wiring.appliance import Appliance


def mount_metrics(app: FastAPI, appliance: Appliance, sampler: MetricsSampler) -> None:
    """Serve ``/metrics`` (app and engine metrics under their real names); start ``sampler``."""
    metrics = appliance.chat.metrics
    if metrics is None:  # built without build_appliance's metrics: count from now on
        metrics = appliance.chat.metrics = AppMetrics(appliance.engine)

    @app.get("/metrics", include_in_schema=False)
    def prometheus_metrics() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    sampler.start()
    appliance.on_close.append(sampler.stop)
