"""Serving the appliance in the foreground (``appliance serve``, and ``appliance cluster up``
once its workers and gateway are ready)."""

from __future__ import annotations

from appliance.core.config import AppConfig


def serve(config: AppConfig) -> int:
    """Build the appliance, serve it until stopped (Ctrl-C, SIGTERM), then close it."""
    import uvicorn

    from appliance.wiring.appliance import build_appliance
    from appliance.wiring.web import build_web_app

    print(f"starting the appliance (profile {config.profile}); first start prepares the models")
    appliance = build_appliance(config)
    if appliance.first_admin_password:
        print(
            f"\n  First admin account created: {config.bootstrap.admin_username} / "
            f"{appliance.first_admin_password}\n  (shown once; change it after logging in)\n"
        )
    app = build_web_app(appliance)
    print(f"serving on http://{config.server.host}:{config.server.port}", flush=True)
    try:
        # the app alone decides what a proxy's X-Forwarded-* say (``security.trusted_proxies``)
        uvicorn.run(
            app,
            host=config.server.host,
            port=config.server.port,
            log_level="warning",
            proxy_headers=False,
        )
    finally:
        appliance.close()
    return 0
