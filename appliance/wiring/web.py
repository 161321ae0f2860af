"""``build_web_app(appliance)``: the FastAPI app a built appliance serves.

Order matters: the JSON/SSE API and ``/v1`` first, then the sign-in pages, the admin console
and ``/metrics``, and the Gradio chat page at ``/`` last (a mount at ``/`` answers every path
registered after it).
"""

from __future__ import annotations

import gradio as gr
from fastapi import FastAPI

from appliance.api.chat import build_api
from appliance.core.services.conversations import ConversationService
from appliance.wiring.admin import mount_admin
from appliance.wiring.appliance import Appliance
from appliance.wiring.metrics import mount_metrics
from ui.chat_page import CSS, JS, build_chat_page, theme
from ui.login.routes import gradio_user, install_login


def build_web_app(appliance: Appliance) -> FastAPI:
    """The API, the OpenAI-compatible ``/v1``, the sign-in pages, the admin console, ``/metrics``
    and the chat page, on one app.

    Browser sessions are the API's hashed, expiring session tokens in an HttpOnly cookie
    (``ui.login.routes``); Gradio asks ``gradio_user`` who is behind each request."""
    conversations = ConversationService(appliance.db, appliance.chat)
    app = build_api(appliance.auth, appliance.chat, appliance.engine, conversations)
    install_login(app, appliance.auth)
    console = mount_admin(app, appliance)
    mount_metrics(app, appliance, console.sampler)
    page = build_chat_page(conversations, appliance.auth)
    return gr.mount_gradio_app(
        app,
        page,
        path="/",
        auth_dependency=gradio_user(appliance.auth),
        theme=theme(),
        css=CSS,
        js=JS,
        ssr_mode=False,
        footer_links=[],
    )
