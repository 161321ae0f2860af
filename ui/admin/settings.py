"""Settings tab: system prompt, top-k, ordering strategy, cache riders, temperature and max tokens.
Saved through ``SettingsService`` (audited; the next turn uses them, no restart)."""

from __future__ import annotations

import gradio as gr

from appliance.core.auth.service import AuthService
from appliance.core.services.admin import AdminConsole
from appliance.core.services.settings import (
    MAX_RIDERS,
    MAX_SYSTEM_PROMPT_CHARS,
    MAX_TOP_K,
    SettingsError,
)
from ui.admin.common import Loader
from ui.session import require_admin


def build_settings_tab(console: AdminConsole, auth: AuthService) -> Loader:
    service = console.settings

    def load(request: gr.Request):  # noqa: ANN202
        require_admin(request, auth)
        s = service.current()
        return s.system_prompt, s.top_k, s.ordering, s.riders, s.temperature, s.max_new_tokens

    def save(
        prompt: str,
        top_k: float,
        ordering: str,
        riders: float,
        temperature: float,
        max_tokens: float,
        request: gr.Request,
    ) -> str:
        who = require_admin(request, auth)
        changes = {
            "system_prompt": prompt,
            "top_k": top_k,
            "ordering": ordering,
            "riders": riders,
            "temperature": temperature,
            "max_new_tokens": max_tokens,
        }
        try:
            service.update(who.username, changes)
        except SettingsError as exc:
            raise gr.Error(str(exc)) from exc
        return "Saved. The next chat turn uses these settings."

    with gr.Tab("Settings", id="settings"):
        prompt = gr.Textbox(
            label="System prompt",
            lines=4,
            max_length=MAX_SYSTEM_PROMPT_CHARS,
            elem_id="setting-prompt",
        )
        with gr.Row():
            top_k = gr.Slider(1, MAX_TOP_K, step=1, label="Top-k chunks", elem_id="setting-topk")
            ordering = gr.Dropdown(service.strategies, label="Context ordering")
            riders = gr.Slider(
                0,
                MAX_RIDERS,
                step=1,
                label="Cache riders (prefix ordering)",
                info="extra candidates sent along only when the engine has them cached; 0: off",
                elem_id="setting-riders",
            )
            temperature = gr.Slider(0.0, 2.0, step=0.05, label="Temperature")
            max_tokens = gr.Number(
                label="Max answer tokens",
                precision=0,
                minimum=1,
                maximum=service.max_new_tokens_cap,
                elem_id="setting-max-tokens",
            )
        save_btn = gr.Button("Save", variant="primary", elem_id="save-settings")
        note = gr.Markdown(elem_id="settings-note")
    fields = [prompt, top_k, ordering, riders, temperature, max_tokens]
    save_btn.click(save, fields, note).success(load, None, fields)
    return Loader(load, fields)
