"""Settings tab: system prompt, top-k, ordering strategy, prompt layout, cache riders,
temperature, max tokens, repetition control (SGLang's penalties, min-p, token top-k, min new
tokens) and grounded answers (the answer mode, the evidence card's size, the repeat stop).
Saved through ``SettingsService`` (audited; the next turn uses them, no restart)."""

from __future__ import annotations

import gradio as gr

from appliance.core.auth.service import AuthService
from appliance.core.services.admin import AdminConsole
from appliance.core.services.grounding import ANSWER_MODES
from appliance.core.services.settings import (
    MAX_EVIDENCE_SENTENCES,
    MAX_RIDERS,
    MAX_SYSTEM_PROMPT_CHARS,
    MAX_TOP_K,
    SettingsError,
    SettingsService,
)
from rag.layout import LAYOUTS
from ui.admin.common import Loader
from ui.session import require_admin

# repetition control, in the order of the tab's second row (SGLang's names and ranges)
REPETITION = (
    "repetition_penalty",
    "frequency_penalty",
    "presence_penalty",
    "min_p",
    "sampling_top_k",
    "min_new_tokens",
)
# grounded answers, the third row
GROUNDING = ("answer_mode", "evidence_sentences", "stop_repeats")


def build_settings_tab(console: AdminConsole, auth: AuthService) -> Loader:
    service = console.settings

    def load(request: gr.Request):  # noqa: ANN202
        require_admin(request, auth)
        s = service.current()
        head = (
            s.system_prompt,
            s.top_k,
            s.ordering,
            s.layout,
            s.riders,
            s.temperature,
            s.max_new_tokens,
        )
        return *head, *(getattr(s, key) for key in (*REPETITION, *GROUNDING))

    def save(
        prompt: str,
        top_k: float,
        ordering: str,
        layout: str,
        riders: float,
        temperature: float,
        max_tokens: float,
        repetition_penalty: float,
        frequency_penalty: float,
        presence_penalty: float,
        min_p: float,
        sampling_top_k: float,
        min_new_tokens: float,
        answer_mode: str,
        evidence_sentences: float,
        stop_repeats: bool,
        request: gr.Request,
    ) -> str:
        who = require_admin(request, auth)
        repetition = (
            repetition_penalty,
            frequency_penalty,
            presence_penalty,
            min_p,
            sampling_top_k,
            min_new_tokens,
        )
        changes = {
            "system_prompt": prompt,
            "top_k": top_k,
            "ordering": ordering,
            "layout": layout,
            "riders": riders,
            "temperature": temperature,
            "max_new_tokens": max_tokens,
            **dict(zip(REPETITION, repetition, strict=True)),
            "answer_mode": answer_mode,
            "evidence_sentences": evidence_sentences,
            "stop_repeats": bool(stop_repeats),
        }
        try:
            service.update(who.username, changes)
        except SettingsError as exc:
            raise gr.Error(str(exc)) from exc
        return "Saved. The next chat turn uses these settings."

    fields, save_btn, note = _tab(service)
    save_btn.click(save, fields, note).success(load, None, fields)
    return Loader(load, fields)


def _tab(service: SettingsService) -> tuple[list[gr.components.Component], gr.Button, gr.Markdown]:
    """The tab's inputs, in ``save``'s order, its Save button and its note."""
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
            layout = gr.Dropdown(
                list(LAYOUTS),
                label="Prompt layout",
                info="follow-ups: append to the last prompt, re-lay the documents first, or "
                "adaptive (per turn, the fewer tokens the cache shadow predicts uncached)",
                elem_id="setting-layout",
            )
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
        repetition = _repetition_row()
        with gr.Row():
            grounding = [
                gr.Radio(
                    list(ANSWER_MODES),
                    label="Answer mode",
                    info="generative: the model's text, checked against the sources; grounded: "
                    "the documents' own sentences first, then the checked text; extractive: "
                    "the sentences only, no generation (staff can still ask for a written "
                    "answer: Write an answer)",
                    elem_id="setting-answer-mode",
                ),
                gr.Slider(
                    0,
                    MAX_EVIDENCE_SENTENCES,
                    step=1,
                    label="Evidence sentences",
                    info="sentences quoted on the card (grounded, extractive)",
                    elem_id="setting-evidence-sentences",
                ),
                gr.Checkbox(
                    label="Stop answers that repeat themselves",
                    info="a sentence said twice ends the answer before the repeat is shown",
                    elem_id="setting-stop-repeats",
                ),
            ]
        save_btn = gr.Button("Save", variant="primary", elem_id="save-settings")
        note = gr.Markdown(elem_id="settings-note")
    head = [prompt, top_k, ordering, layout, riders, temperature, max_tokens]
    fields = [*head, *repetition, *grounding]
    return fields, save_btn, note


def _repetition_row() -> list[gr.components.Component]:
    """SGLang's repetition control, one input per ``REPETITION`` key (its ranges)."""
    with gr.Row():
        return [
            gr.Number(
                label="Repetition penalty",
                info="(0, 2]; 1: off. Divides the scores of tokens already generated",
                minimum=0.01,
                maximum=2.0,
                step=0.05,
                elem_id="setting-repetition-penalty",
            ),
            gr.Number(
                label="Frequency penalty",
                info="[-2, 2]; 0: off. Per repeat of a token",
                minimum=-2.0,
                maximum=2.0,
                step=0.05,
                elem_id="setting-frequency-penalty",
            ),
            gr.Number(
                label="Presence penalty",
                info="[-2, 2]; 0: off. Once a token occurred",
                minimum=-2.0,
                maximum=2.0,
                step=0.05,
                elem_id="setting-presence-penalty",
            ),
            gr.Number(
                label="Min-p",
                info="[0, 1]; 0: off",
                minimum=0.0,
                maximum=1.0,
                step=0.01,
                elem_id="setting-min-p",
            ),
            gr.Number(
                label="Sampling top-k (tokens)",
                info="-1: whole vocabulary; 1: greedy",
                precision=0,
                minimum=-1,
                elem_id="setting-sampling-top-k",
            ),
            gr.Number(
                label="Min answer tokens",
                info="the end of the answer is held back until then",
                precision=0,
                minimum=0,
                elem_id="setting-min-new-tokens",
            ),
        ]
