"""What the chat page's components show for a conversation (pure)."""

from __future__ import annotations

import html
from dataclasses import dataclass

import gradio as gr

from appliance.core.errors import ErrorKind
from appliance.core.services.conversations import ConversationSummary, Turn
from ui.charts import conversation_chart
from ui.format import citations_html, panel_html
from ui.grounded import answer_bubble, verified_line
from ui.i18n import t


@dataclass(frozen=True)
class ConversationView:
    history: list[dict]  # the Chatbot's messages
    message_ids: list[int | None]  # per shown message: the assistant message id, or None
    sources: str
    panel: str
    chart: str
    feedback: list[str | None]  # per assistant message: "Like", "Dislike" or None
    cut: bool = False  # the last answer was cut at the length limit: say so, offer Continue
    # the last answer is extractive (the documents' sentences only): offer "Write an answer"
    write: bool = False

    def outputs(self) -> list:
        """Values for ``ChatComponents.view_outputs()`` (the chatbot keeps its thumbs)."""
        chat = gr.update(value=self.history, feedback_value=self.feedback)
        cut, write = gr.update(visible=self.cut), gr.update(visible=self.write)
        return [chat, self.message_ids, self.sources, self.panel, self.chart, cut, write]


def conversation_view(turns: list[Turn], lang: str) -> ConversationView:
    """The stored turns as chat messages; sources and panel for the last answer; the chart
    of every turn."""
    history: list[dict] = []
    ids: list[int | None] = []
    last = turns[-1] if turns else None
    for turn in turns:
        # the sources list shows the last answer's: only its [n] can link there
        numbers = cited_numbers(turn) if turn is last else []
        answer = answer_bubble(
            turn.answer, numbers, lang, turn.evidence, turn.verification, turn.answer_mode
        )
        if turn.finish_reason == "repetition":  # stopped by the repeat guard (rag.repeats)
            answer += (
                f'\n\n<p class="turn-note repeated">{html.escape(t(lang, "chat.repeated"))}</p>'
            )
        history += [
            {"role": "user", "content": turn.question},
            {"role": "assistant", "content": answer},
        ]
        ids += [None, turn.message_id]
    return ConversationView(
        history,
        ids,
        citations_html(last.citations if last else [], lang, last.evidence if last else ()),
        panel_html(
            last.stats if last else None,
            cited_numbers(last),
            lang,
            verified_line(last.verification, lang) if last else None,
        ),
        conversation_chart([(x.stats.ttft_ms / 1000, x.stats.hit_pct) for x in turns], lang),
        [{1: "Like", -1: "Dislike"}.get(x.rating or 0) for x in turns],
        last is not None and last.finish_reason == "length",
        last is not None and last.answer_mode == "extractive",
    )


def cited_numbers(turn: Turn | None) -> list[int]:
    return sorted({c["number"] for c in turn.citations}) if turn else []


def error_note(kind: ErrorKind, message: str, lang: str) -> str:
    """The chat bubble for a turn that failed: what happened, and that nothing was lost. Its
    class names the kind (``turn-note busy``, ``unavailable`` or ``other``), for tests and the
    load bench's browsers."""
    if kind in ("busy", "unavailable"):
        return _kept_note(t(lang, f"error.{kind}"), kind, lang)
    return _kept_note(t(lang, "error.other", message=message), "other", lang)


def _kept_note(head: str, classes: str, lang: str) -> str:
    """A turn that ended without an answer: ``head``, then that the question was kept."""
    note = f"⚠️ **{html.escape(head)}** {html.escape(t(lang, 'error.keep'))}"
    return f"<span class='turn-note {classes}'>{note}</span>"


def refused_note(reason: str, limit: int, lang: str) -> str:
    """The chat bubble for a turn the line refused (``TurnRefused``): the user already has
    ``limit`` questions in it ("yours"), or ``limit`` questions already wait ("full"). Its
    class is ``turn-note busy``: the engine is busy for this user; nothing was lost."""
    return _kept_note(t(lang, f"error.{reason}", n=limit), f"busy {reason}", lang)


def waiting_note(ahead: int, lang: str) -> str:
    """The chat bubble for a question that waits for the engine: where it is in the line."""
    if ahead == 0:
        text = t(lang, "chat.next")
    else:
        text = t(lang, "chat.ahead_one" if ahead == 1 else "chat.ahead", n=ahead)
    return f"<span class='turn-note waiting'>⏳ {html.escape(text)}</span>"


def conversation_choices(
    conversations: list[ConversationSummary], lang: str
) -> list[tuple[str, int]]:
    """The conversation list's (label, id) choices, untitled ones named as such."""
    return [(c.title or t(lang, "conv.untitled"), c.id) for c in conversations]
