"""The wiring: ``build_appliance(config)`` starts the core in order, ``build_web_app`` mounts
the HTTP API, the sign-in pages, the admin console and the chat page. The only code that
imports ``ui``."""
