"""Audit tab: logins, failed logins, admin actions and document changes; CSV export."""

from __future__ import annotations

import tempfile
from pathlib import Path

import gradio as gr

from appliance.core.auth.service import AuthService
from appliance.core.services.admin import AdminConsole
from appliance.core.services.admin.audit import CATEGORIES, CSV_FIELDS
from ui.admin.common import Loader, table
from ui.session import require_admin


def build_audit_tab(console: AdminConsole, auth: AuthService) -> Loader:
    audit = console.audit

    def load(category: str, actor: str, request: gr.Request):  # noqa: ANN202
        require_admin(request, auth)
        return table(audit.query(category or "all", actor or ""), CSV_FIELDS)

    def export(category: str, actor: str, request: gr.Request) -> str:
        require_admin(request, auth)
        folder = Path(tempfile.mkdtemp(prefix="audit-"))
        path = folder / "audit.csv"
        path.write_text(audit.csv(category or "all", actor or ""), encoding="utf-8")
        return str(path)

    with gr.Tab("Audit", id="audit"):
        with gr.Row():
            category = gr.Dropdown(list(CATEGORIES), value="all", label="Show")
            actor = gr.Textbox(label="Actor (exact)")
            show = gr.Button("Show", elem_id="audit-show")
            export_btn = gr.Button("Export CSV", elem_id="audit-export")
        events = gr.Dataframe(table([], CSV_FIELDS), label="Events", elem_id="audit-events")
        download = gr.File(label="CSV", elem_id="audit-csv")
    show.click(load, [category, actor], events)
    category.change(load, [category, actor], events)
    export_btn.click(export, [category, actor], download)

    def load_all(request: gr.Request):  # noqa: ANN202
        return load("all", "", request)

    return Loader(load_all, [events])
