"""``mount_admin``: the admin console at ``/admin`` and the admin REST API under ``/api/admin``.

Call it before the chat page is mounted at ``/``. The console signs in with the chat page's
session (``ui.login.routes``); every handler then checks the admin role on the server.
"""

from __future__ import annotations

import gradio as gr
from fastapi import FastAPI

from appliance.api.admin import build_admin_router
from appliance.core.services.admin import AdminConsole
from appliance.wiring.appliance import Appliance, build_console
from ui.admin.page import build_admin_page
from ui.chat_page import CSS, theme
from ui.login.routes import gradio_user


def mount_admin(app: FastAPI, appliance: Appliance) -> AdminConsole:
    """Wire the console and its REST API into ``app``; return the console's services."""
    console = build_console(appliance)
    max_upload = appliance.config.rag.max_upload_mb * 1024 * 1024
    app.include_router(build_admin_router(console, max_upload))
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
        max_file_size=max_upload,  # per file, checked by Gradio as the upload streams in
    )
    return console
