"""The chat page's components, and how each one's words change with the language."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gradio as gr

from appliance.core.auth.service import AuthService
from ui.chat.keys import KeysPanel
from ui.i18n import LANGUAGE_NAMES, t
from ui.login.button import logout_button, logout_form


@dataclass
class ChatComponents:
    lang: gr.State
    lang_pref: gr.BrowserState
    conv: gr.State
    ids: gr.State
    rated: gr.State
    title: gr.Markdown
    lang_switch: gr.Radio
    logout: gr.HTML
    conversations: gr.Radio
    new: gr.Button
    manage: gr.Accordion
    rename_box: gr.Textbox
    rename: gr.Button
    delete: gr.Button
    chatbot: gr.Chatbot
    cut_box: gr.Row
    cut_note: gr.Markdown
    continue_button: gr.Button
    write_box: gr.Row
    write_note: gr.Markdown
    write_button: gr.Button
    question: gr.Textbox
    send: gr.Button
    stop: gr.Button
    regenerate: gr.Button
    sources_heading: gr.Markdown
    sources: gr.HTML
    panel_heading: gr.Markdown
    panel: gr.HTML
    chart_heading: gr.Markdown
    chart: gr.HTML
    feedback_heading: gr.Markdown
    comment: gr.Textbox
    send_feedback: gr.Button
    feedback_status: gr.Markdown
    keys: KeysPanel

    def view_outputs(self) -> list[gr.components.Component]:
        """What ``ConversationView`` fills, in its field order."""
        return [
            *(self.chatbot, self.ids, self.sources, self.panel, self.chart),
            *(self.cut_box, self.write_box),
        ]

    def labelled(self) -> list[tuple[gr.components.Component, Callable[[str], dict]]]:
        """Every component with words on it, and its update for a language."""

        def value(key: str, fmt: str = "{}") -> Callable[[str], dict]:
            return lambda lang: gr.update(value=fmt.format(t(lang, key)))

        def label(key: str) -> Callable[[str], dict]:
            return lambda lang: gr.update(label=t(lang, key))

        return [
            (self.title, value("app.title", "## {}")),
            (self.lang_switch, label("nav.language")),
            (self.logout, lambda lang: gr.update(value=logout_form(t(lang, "nav.logout")))),
            (self.conversations, label("conv.heading")),
            (self.new, value("conv.new")),
            (self.manage, label("conv.manage")),
            (self.rename_box, label("conv.rename_label")),
            (self.rename, value("conv.rename")),
            (self.delete, value("conv.delete")),
            (self.chatbot, label("chat.label")),
            (self.cut_note, value("chat.cut", "_{}_")),
            (self.continue_button, value("chat.continue")),
            (self.write_note, value("chat.write_note", "_{}_")),
            (self.write_button, value("chat.write")),
            (
                self.question,
                lambda lang: gr.update(
                    label=t(lang, "chat.question"), placeholder=t(lang, "chat.placeholder")
                ),
            ),
            (self.send, value("chat.send")),
            (self.stop, value("chat.stop")),
            (self.regenerate, value("chat.regenerate")),
            (self.sources_heading, value("sources.heading", "### {}")),
            (self.panel_heading, value("panel.heading", "### {}")),
            (self.chart_heading, value("chart.heading", "#### {}")),
            (self.feedback_heading, value("feedback.heading", "#### {}")),
            (self.comment, label("feedback.comment")),
            (self.send_feedback, value("feedback.send")),
            *self.keys.labelled(),
        ]


@dataclass(frozen=True)
class _Header:
    title: gr.Markdown
    lang_switch: gr.Radio
    logout: gr.HTML


@dataclass(frozen=True)
class _Sidebar:
    new: gr.Button
    conversations: gr.Radio
    manage: gr.Accordion
    rename_box: gr.Textbox
    rename: gr.Button
    delete: gr.Button
    keys: KeysPanel


@dataclass(frozen=True)
class _ChatColumn:
    chatbot: gr.Chatbot
    cut_box: gr.Row
    cut_note: gr.Markdown
    continue_button: gr.Button
    write_box: gr.Row
    write_note: gr.Markdown
    write_button: gr.Button
    question: gr.Textbox
    send: gr.Button
    stop: gr.Button
    regenerate: gr.Button


@dataclass(frozen=True)
class _EvidenceColumn:
    sources_heading: gr.Markdown
    sources: gr.HTML
    panel_heading: gr.Markdown
    panel: gr.HTML
    chart_heading: gr.Markdown
    chart: gr.HTML
    feedback_heading: gr.Markdown
    comment: gr.Textbox
    send_feedback: gr.Button
    feedback_status: gr.Markdown


def build_layout(auth: AuthService, lang: str = "en") -> ChatComponents:
    """Lay out the page (call inside ``gr.Blocks``); words start in ``lang``."""
    lang_state = gr.State(lang)
    lang_pref = gr.BrowserState("", storage_key="appliance_lang")
    conv, ids, rated = gr.State(None), gr.State([]), gr.State(None)
    head = _header(lang)
    with gr.Row():  # left to right, in creation order
        side = _sidebar(auth, lang)
        chat = _chat_column(lang)
        ev = _evidence_column(lang)
    return ChatComponents(
        lang=lang_state,
        lang_pref=lang_pref,
        conv=conv,
        ids=ids,
        rated=rated,
        title=head.title,
        lang_switch=head.lang_switch,
        logout=head.logout,
        conversations=side.conversations,
        new=side.new,
        manage=side.manage,
        rename_box=side.rename_box,
        rename=side.rename,
        delete=side.delete,
        chatbot=chat.chatbot,
        cut_box=chat.cut_box,
        cut_note=chat.cut_note,
        continue_button=chat.continue_button,
        write_box=chat.write_box,
        write_note=chat.write_note,
        write_button=chat.write_button,
        question=chat.question,
        send=chat.send,
        stop=chat.stop,
        regenerate=chat.regenerate,
        sources_heading=ev.sources_heading,
        sources=ev.sources,
        panel_heading=ev.panel_heading,
        panel=ev.panel,
        chart_heading=ev.chart_heading,
        chart=ev.chart,
        feedback_heading=ev.feedback_heading,
        comment=ev.comment,
        send_feedback=ev.send_feedback,
        feedback_status=ev.feedback_status,
        keys=side.keys,
    )


def _header(lang: str) -> _Header:
    with gr.Row():
        title = gr.Markdown(f"## {t(lang, 'app.title')}", elem_id="title")
        lang_switch = gr.Radio(
            [(name, code) for code, name in LANGUAGE_NAMES.items()],
            value=lang,
            label=t(lang, "nav.language"),
            elem_id="lang",
            scale=0,
            min_width=220,
        )
        logout = logout_button(t(lang, "nav.logout"))  # a form posting to /logout
    return _Header(title, lang_switch, logout)


def _sidebar(auth: AuthService, lang: str) -> _Sidebar:
    """Conversations (new, pick, rename, delete) and the API keys panel."""
    with gr.Column(scale=1, min_width=220):
        new = gr.Button(t(lang, "conv.new"), elem_id="new-chat", variant="secondary")
        conversations = gr.Radio(
            [], label=t(lang, "conv.heading"), elem_id="conversations", type="value"
        )
        with gr.Accordion(t(lang, "conv.manage"), open=False, elem_id="manage") as manage:
            rename_box = gr.Textbox(
                label=t(lang, "conv.rename_label"), elem_id="rename-box", max_lines=1
            )
            with gr.Row():
                rename = gr.Button(t(lang, "conv.rename"), size="sm", elem_id="rename")
                delete = gr.Button(
                    t(lang, "conv.delete"), size="sm", variant="stop", elem_id="delete"
                )
        keys = KeysPanel(auth, lang)
    return _Sidebar(new, conversations, manage, rename_box, rename, delete, keys)


def _chat_column(lang: str) -> _ChatColumn:
    """The chat, the note and Continue for an answer cut at the length limit (shown only then),
    and the question box: Enter sends, Shift+Enter starts a new line (Gradio submits on Enter
    when the box starts at one line and may grow; ``chat_page.JS`` keeps an Enter that confirms
    an IME composition, such as a Korean syllable, from sending)."""
    with gr.Column(scale=3):
        chatbot = gr.Chatbot(
            label=t(lang, "chat.label"),
            height=520,
            elem_id="chatbot",
            buttons=["copy"],
            feedback_options=("Like", "Dislike"),
        )
        with gr.Row(visible=False, elem_id="cut-box", equal_height=True) as cut_box:
            cut_note = gr.Markdown(f"_{t(lang, 'chat.cut')}_", elem_id="cut-note")
            continue_button = gr.Button(
                t(lang, "chat.continue"), size="sm", scale=0, min_width=120, elem_id="continue"
            )
        # after an extractive answer (the documents' sentences only): generate on request
        with gr.Row(visible=False, elem_id="write-box", equal_height=True) as write_box:
            write_note = gr.Markdown(f"_{t(lang, 'chat.write_note')}_", elem_id="write-note")
            write_button = gr.Button(
                t(lang, "chat.write"), size="sm", scale=0, min_width=140, elem_id="write"
            )
        question = gr.Textbox(
            label=t(lang, "chat.question"),
            placeholder=t(lang, "chat.placeholder"),
            elem_id="question",
            lines=1,
            max_lines=8,
        )
        with gr.Row():
            send = gr.Button(t(lang, "chat.send"), variant="primary", elem_id="send")
            stop = gr.Button(t(lang, "chat.stop"), elem_id="stop")
            regenerate = gr.Button(t(lang, "chat.regenerate"), elem_id="regenerate")
    return _ChatColumn(
        *(chatbot, cut_box, cut_note, continue_button, write_box, write_note, write_button),
        *(question, send, stop, regenerate),
    )


def _evidence_column(lang: str) -> _EvidenceColumn:
    """Sources, the answer panel and its chart, and feedback."""
    with gr.Column(scale=2):
        sources_heading = gr.Markdown(f"### {t(lang, 'sources.heading')}")
        sources = gr.HTML("", elem_id="sources")
        with gr.Column(elem_id="answer-panel"):
            panel_heading = gr.Markdown(f"### {t(lang, 'panel.heading')}")
            panel = gr.HTML("", elem_id="panel")
            chart_heading = gr.Markdown(f"#### {t(lang, 'chart.heading')}")
            chart = gr.HTML("", elem_id="chart")
        feedback_heading = gr.Markdown(f"#### {t(lang, 'feedback.heading')}")
        comment = gr.Textbox(
            label=t(lang, "feedback.comment"), elem_id="feedback-comment", max_lines=3
        )
        send_feedback = gr.Button(t(lang, "feedback.send"), size="sm", elem_id="send-feedback")
        feedback_status = gr.Markdown("", elem_id="feedback-status")
    return _EvidenceColumn(
        sources_heading,
        sources,
        panel_heading,
        panel,
        chart_heading,
        chart,
        feedback_heading,
        comment,
        send_feedback,
        feedback_status,
    )
