"""The admin console page: one tab per area. Nothing is shown and no data is loaded until the
server has checked, on page load, that the signed-in user is an admin; every handler checks
again on each call (a role can change while a page is open)."""

from __future__ import annotations

import gradio as gr

from appliance.core.auth.service import AuthService
from appliance.core.services.admin import AdminConsole
from ui.admin.analytics import build_analytics_tab
from ui.admin.audit import build_audit_tab
from ui.admin.directory import build_directory_tab
from ui.admin.documents import build_documents_tab
from ui.admin.engine import build_engine_tab
from ui.admin.planner import build_planner_tab
from ui.admin.settings import build_settings_tab
from ui.admin.users import build_users_tab
from ui.login.button import logout_button
from ui.session import require_admin

DENIED = "This console is for administrators. [Back to the chat](/)"


def build_admin_page(
    console: AdminConsole, auth: AuthService, delete_cache: tuple[int, int] | None = None
) -> gr.Blocks:
    """The console; ``delete_cache`` (every, older than: seconds) sweeps the files it was
    given or made (uploads never ingested, audit exports)."""

    def gate(request: gr.Request):  # noqa: ANN202
        who = require_admin(request, auth)  # staff: an error, and the console stays hidden
        return gr.Markdown(f"Signed in as **{who.username}**"), gr.Column(visible=True)

    def live(request: gr.Request) -> gr.Timer:
        require_admin(request, auth)
        return gr.Timer(active=True)

    with gr.Blocks(
        title="Admin console", analytics_enabled=False, delete_cache=delete_cache
    ) as page:
        with gr.Row():
            gr.Markdown("## Admin console")
            who = gr.Markdown(DENIED, elem_id="admin-who")
            gr.Button("Chat", link="/", size="sm", scale=0)
            logout_button("Log out")  # a form posting to /logout
        with gr.Column(visible=False, elem_id="admin-tabs") as console_box, gr.Tabs():
            loaders = [build_documents_tab(console, auth), build_users_tab(console, auth)]
            engine_loader, timer = build_engine_tab(console, auth)
            loaders.append(engine_loader)
            build_planner_tab(auth)
            loaders.append(build_settings_tab(console, auth))
            sign_in = build_directory_tab(console, auth)
            loaders += [sign_in] if sign_in else []
            loaders += [build_audit_tab(console, auth), build_analytics_tab(console, auth)]
        step = page.load(gate, None, [who, console_box])
        for loader in loaders:
            step = step.success(loader.fn, None, list(loader.outputs))
        step.success(live, None, timer)
    return page
