"""The staff chat page: streaming answers, numbered sources and the per-answer panel."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict

import gradio as gr

from appliance.auth import AuthService
from appliance.services.chat import (
    ChatError,
    ChatService,
    DeltaEvent,
    DoneEvent,
    ErrorEvent,
    RetrievalEvent,
)
from ui.format import citations_markdown, panel_markdown, stats_row
from ui.session import require_principal

CSS = """
.citation summary { cursor: pointer; }
.citation mark { background: #fff3b0; display: block; padding: 6px; white-space: pre-wrap; }
"""


def theme() -> gr.themes.Base:
    # system fonts only: the appliance is air-gapped, so nothing may come from a font CDN
    return gr.themes.Soft(
        font=["system-ui", "Apple SD Gothic Neo", "Malgun Gothic", "sans-serif"],
        font_mono=["ui-monospace", "monospace"],
    )


def build_chat_page(chat: ChatService, auth: AuthService) -> gr.Blocks:
    def who(request: gr.Request):  # noqa: ANN202
        return require_principal(request, auth)

    def load(request: gr.Request):  # noqa: ANN202
        principal = who(request)
        convs = chat.list_conversations(principal)
        if not convs:
            return [], None, citations_markdown([]), panel_markdown(None)
        conv_id = convs[0]["id"]
        messages = chat.get_messages(principal, conv_id)
        history = [{"role": m["role"], "content": m["content"]} for m in messages]
        last = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
        return (
            history,
            conv_id,
            citations_markdown(last["citations"] if last else []),
            panel_markdown(last),
        )

    def respond(
        question: str, conv_id: int | None, history: list, request: gr.Request
    ) -> Iterator[tuple]:
        principal = who(request)
        history = list(history or [])
        shown = [*history, {"role": "user", "content": question}]
        try:
            events = chat.ask(principal, question, conv_id)
        except ChatError as exc:
            # the question stays in the box so the user can retry; nothing was stored
            gr.Warning(str(exc))
            yield history, question, conv_id, gr.update(), gr.update()
            return
        answer = ""
        sources = gr.update()
        for event in events:
            if isinstance(event, RetrievalEvent):
                sources = citations_markdown([asdict(c) for c in event.citations])
                yield (
                    [*shown, {"role": "assistant", "content": "…"}],
                    question,
                    conv_id,
                    (sources),
                    gr.update(),
                )
            elif isinstance(event, DeltaEvent):
                answer += event.text
                yield (
                    [*shown, {"role": "assistant", "content": answer}],
                    question,
                    conv_id,
                    (sources),
                    gr.update(),
                )
            elif isinstance(event, ErrorEvent):
                note = f"⚠️ {event.message} Your question is kept below; press Send to retry."
                yield (
                    [*shown, {"role": "assistant", "content": note}],
                    question,
                    conv_id,
                    (sources),
                    gr.update(),
                )
                return
            elif isinstance(event, DoneEvent):
                panel = panel_markdown(stats_row(event.stats, event.retrieval_ms))
                final = [*shown, {"role": "assistant", "content": event.answer}]
                yield final, "", event.conversation_id, sources, panel

    def new_chat():  # noqa: ANN202
        return [], None, citations_markdown([]), panel_markdown(None), ""

    with gr.Blocks(title="Company help chat", analytics_enabled=False) as page:
        conv_state = gr.State(None)
        with gr.Row():
            gr.Markdown("## Company help chat")
            gr.Button("Log out", link="/logout", size="sm", scale=0)
        with gr.Row():
            with gr.Column(scale=3):
                chatbot = gr.Chatbot(label="Chat", height=520, elem_id="chatbot")
                question = gr.Textbox(
                    label="Your question",
                    placeholder="Ask about IT, HR or security policies…",
                    elem_id="question",
                    lines=2,
                )
                with gr.Row():
                    send = gr.Button("Send", variant="primary", elem_id="send")
                    stop = gr.Button("Stop", elem_id="stop")
                    new = gr.Button("New chat", elem_id="new-chat")
            with gr.Column(scale=2):
                gr.Markdown("### Sources")
                sources = gr.Markdown(citations_markdown([]), elem_id="sources")
                gr.Markdown("### This answer")
                panel = gr.Markdown(panel_markdown(None), elem_id="panel")
        outputs = [chatbot, question, conv_state, sources, panel]
        inputs = [question, conv_state, chatbot]
        sent = send.click(respond, inputs, outputs)
        submitted = question.submit(respond, inputs, outputs)
        stop.click(None, cancels=[sent, submitted])
        new.click(new_chat, None, [chatbot, conv_state, sources, panel, question])
        page.load(load, None, [chatbot, conv_state, sources, panel])
    return page
