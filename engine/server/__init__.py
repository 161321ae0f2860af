"""An SGLang-compatible HTTP server for any ``engine.base.Engine``: the native API (``/generate``
and friends), the OpenAI API (``/v1/...``) and Prometheus ``/metrics`` under SGLang's names.

``app.build_server_app(engine, served_model_name)`` builds it; nothing runs at import.
"""
