"""``mount_metrics``: Prometheus ``/metrics`` on the web app, and the sampler that feeds the
admin console's live charts (started here, stopped by ``Appliance.close``).

``/metrics`` tells who uses the appliance how much, so it is not public: it answers a scraper
that sends ``Authorization: Bearer <security.metrics_token>`` and signed-in admins (a session
token or the browser's session cookie); anyone else gets 401, a signed-in non-admin 403.
"""

from __future__ import annotations

import hmac

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from appliance.api.bearer import bearer_token
from appliance.core.auth.service import AuthService
from appliance.core.metrics import AppMetrics
from appliance.core.services.admin.sampler import MetricsSampler
from appliance.wiring.appliance import Appliance
from ui.login.routes import session_principal


def metrics_refusal(request: Request, auth: AuthService, scrape_token: str) -> Response | None:
    """None when the request may read ``/metrics``, else the answer that refuses it."""
    token = bearer_token(request.headers.get("authorization"))
    if token and scrape_token and hmac.compare_digest(token.encode(), scrape_token.encode()):
        return None
    who = auth.resolve(token) if token else session_principal(auth, request)
    if who is not None and who.is_admin:
        return None
    if who is not None:
        return JSONResponse({"detail": "administrators only"}, 403)
    return JSONResponse(
        {"detail": "send the metrics token (security.metrics_token) as a bearer token"},
        401,
        {"WWW-Authenticate": "Bearer"},
    )


def mount_metrics(app: FastAPI, appliance: Appliance, sampler: MetricsSampler) -> None:
    """Serve ``/metrics`` (app and engine metrics under their real names); start ``sampler``."""
    metrics = appliance.chat.metrics
    if metrics is None:  # built without build_appliance's metrics: count from now on
        metrics = appliance.chat.metrics = AppMetrics(appliance.engine)
    scrape_token = appliance.config.security.metrics_token

    @app.get("/metrics", include_in_schema=False)
    def prometheus_metrics(request: Request) -> Response:
        refusal = metrics_refusal(request, appliance.auth, scrape_token)
        if refusal is not None:
            return refusal
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    sampler.start()
    appliance.on_close.append(sampler.stop)
