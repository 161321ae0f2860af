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

# files uploaded in the console but never ingested (a closed page, a failed upload) are
# deleted this long after they came, looked for this often (seconds); an ingested file is
# deleted as soon as it is read
UPLOAD_MAX_AGE_S = 3600
UPLOAD_SWEEP_S = 600


def mount_admin(app: FastAPI, appliance: Appliance) -> tuple[AdminConsole, gr.Blocks]:
    """Wire the console and its REST API into ``app``; return the console's services and
    its page."""
    console = build_console(appliance)
    max_upload = appliance.config.rag.max_upload_mb * 1024 * 1024
    app.include_router(build_admin_router(console, max_upload))
    app.state.admin_console = console  # tests and shutdown reach the sampler here
    page = build_admin_page(console, appliance.auth, (UPLOAD_SWEEP_S, UPLOAD_MAX_AGE_S))
    gr.mount_gradio_app(
        app,
        page,
        path="/admin",
        auth_dependency=gradio_user(appliance.auth),  # the chat page's session cookie
        theme=theme(),
        css=CSS,
        ssr_mode=False,
        footer_links=[],
        max_file_size=max_upload,  # per file, checked by Gradio as the upload streams in
        run_history=False,  # a new account's password is not kept in the browser
    )
    return console, page
