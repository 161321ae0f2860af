"""The staff chat page: conversations, streaming answers with numbered sources, the
per-answer panel and chart, feedback, Korean and English. Layout, handlers and view live in
``ui.chat``; this module assembles them."""

from __future__ import annotations

import gradio as gr

from appliance.core.auth.service import AuthService
from appliance.core.config import ChatConfig, EngineConfig
from appliance.core.services.conversations import ConversationService
from appliance.core.services.turn_line import TurnCapacity, TurnLine
from ui.chat.handlers import TURN_OUTPUTS, ChatHandlers
from ui.chat.layout import build_layout

CSS = """
.citation { border-bottom: 1px solid var(--border-color-primary); padding: 4px 0; }
.citation summary { cursor: pointer; }
.citation mark.chunk { background: #fff3b0; color: #222; display: block; padding: 8px;
  margin-top: 6px; border-radius: 6px; white-space: pre-wrap; font-size: .9em; }
.muted { color: var(--body-text-color-subdued); }
table.panel { width: 100%; border-collapse: collapse; font-size: .92em; border: none; }
table.panel th, table.panel td { border: none; padding: 3px 4px;
  border-bottom: 1px solid var(--border-color-primary); background: none; }
table.panel th { text-align: left; font-weight: normal; }
#panel table.panel, #panel table.panel tr { border: none !important; }
table.panel td { text-align: right; font-variant-numeric: tabular-nums; font-weight: 600; }
.bar { display: flex; height: 12px; border-radius: 6px; overflow: hidden; margin: 4px 0 8px;
  background: var(--neutral-200); }
.seg.retrieval, .dot.retrieval { background: #a78bfa; }
.seg.ttft, .dot.ttft { background: #f59e0b; }
.seg.decode, .dot.decode { background: #60a5fa; }
.seg.cached, .dot.cached, .dot.hit { background: #10b981; }
.seg.uncached { background: #d1d5db; }
.legend { font-size: .8em; color: var(--body-text-color-subdued); margin-top: 6px; }
.dot { display: inline-block; width: 9px; height: 9px; border-radius: 50%; margin: 0 3px 0 6px; }
svg.turn-chart text { font-size: 10px; fill: #6b7280; }
svg.turn-chart rect.ttft { fill: #f59e0b; }
svg.turn-chart polyline.hit { stroke: #10b981; stroke-width: 2; }
svg.turn-chart circle.hit { fill: #10b981; }
svg.turn-chart line.axis { stroke: #d1d5db; }
.citation.flash summary { background: #fff3b0; transition: background .3s; }
.citation .opening { color: var(--body-text-color-subdued); font-size: .92em; }
#cut-box { align-items: center; border-left: 3px solid #f59e0b; padding-left: 8px; }
.citation mark.evidence { background: #fde047; color: #111; border-radius: 3px; }
.citation mark.evidence.flash { outline: 2px solid #f59e0b; }
.unsupported { text-decoration: underline dotted #dc2626; text-underline-offset: 3px; }
.unsupported-mark, .bad-cite { color: #dc2626; cursor: help; }
"""

# runs once on page load: a click on an answer's [n] link opens source n and scrolls to it (a
# card sentence's [n] opens its source on that sentence, marked in the chunk)
# (capture phase, so the chatbot's own link handling never navigates away). And in the question
# box, the Enter that confirms an IME composition (a Korean syllable, a Japanese conversion) is
# kept from Gradio's own handler, which sends on Enter's keypress: only a plain Enter sends.
# Chrome marks that key's keydown ``isComposing`` or with key code 229 (Safari sends it after
# ``compositionend``, with 229), so the keypress that follows it is held back too. Capture
# phase on the window runs before the textarea's own listeners.
JS = """
() => {
  const inBox = (event) => event.target.closest && event.target.closest('#question');
  let confirming = false;  // the key being pressed confirms a composition
  window.addEventListener('keydown', (event) => {
    if (!inBox(event)) return;
    confirming = event.isComposing || event.keyCode === 229;
    if (confirming && event.key === 'Enter') event.stopImmediatePropagation();
  }, true);
  window.addEventListener('keypress', (event) => {
    if (!inBox(event) || event.key !== 'Enter') return;
    if (confirming || event.isComposing) event.stopImmediatePropagation();
  }, true);
  window.addEventListener('keyup', () => { confirming = false; }, true);
  document.addEventListener('click', (event) => {
    const link = event.target.closest &&
      event.target.closest('a[href^="#source-"], a[href^="#evidence-"]');
    if (!link) return;
    event.preventDefault();
    event.stopPropagation();
    const target = document.getElementById(link.getAttribute('href').slice(1));
    if (!target) return;
    const entry = target.closest('details') || target;
    entry.open = true;
    target.scrollIntoView({block: 'center'});
    for (const el of new Set([entry, target])) {
      el.classList.add('flash');
      setTimeout(() => el.classList.remove('flash'), 1500);
    }
  }, true);
}
"""


def theme() -> gr.themes.Base:
    # system fonts only: the appliance is air-gapped, so nothing may come from a font CDN
    return gr.themes.Soft(
        font=["system-ui", "Apple SD Gothic Neo", "Malgun Gothic", "sans-serif"],
        font_mono=["ui-monospace", "monospace"],
    )


# the four events that generate an answer share one pool of workers. Their handlers take turns
# in the page's ``TurnLine``: as many generate as the engine runs, ``TurnCapacity.waiting``
# more wait and say where they are, each person holds at most their share, and any other turn
# is refused at once with a note. Gradio runs ``TurnCapacity.total`` of them, plus ``REFUSERS``
# spare workers, so that a turn beyond the line is always refused at once instead of waiting
# unseen in Gradio's own queue behind a flood. Gradio's queue (events that wait for any worker)
# is bounded too: beyond ``queue_size`` a join is answered 503 "queue full".
TURNS = "chat-turn"
REFUSERS = 8  # workers kept free for the turns the line refuses
OTHER_EVENTS = 16  # page loads, conversation list, feedback: threads beside the turns


def queue_size(capacity: TurnCapacity) -> int:
    """Events that may wait for a Gradio worker: a burst of every turn the line holds and of
    every other event at once."""
    return capacity.total + REFUSERS + OTHER_EVENTS


def build_chat_page(
    conversations: ConversationService,
    auth: AuthService,
    engine: EngineConfig | None = None,
    chat: ChatConfig | None = None,
) -> gr.Blocks:
    """The chat page; ``engine`` and ``chat`` (the config's sections) size how many people
    are answered at once, and each person's share (``TurnCapacity.of``)."""
    capacity = TurnCapacity.of(engine or EngineConfig(), chat)
    with gr.Blocks(title="Company help chat", analytics_enabled=False) as page:
        c = build_layout(auth)
        h = ChatHandlers(conversations, auth, c, TurnLine(capacity))
        labelled = [component for component, _update in c.labelled()]
        view = c.view_outputs()
        turn = [getattr(c, name) for name in TURN_OUTPUTS]

        page.load(
            h.load,
            [c.lang_pref],
            [c.lang, c.lang_switch, *labelled, c.conversations, c.conv, *view],
        )
        c.lang_switch.input(
            h.switch_language,
            [c.lang_switch, c.conv],
            [c.lang, c.lang_pref, *labelled, c.conversations, *view],
        )
        c.conversations.input(h.select, [c.conversations, c.lang], [c.conv, c.rename_box, *view])
        c.new.click(h.new_chat, [c.lang], [c.conv, c.conversations, c.question, *view])
        c.rename.click(h.rename, [c.conv, c.rename_box, c.lang], [c.conversations])
        c.delete.click(h.delete, [c.conv, c.lang], [c.conv, c.conversations, c.question, *view])

        ask_inputs = [c.question, c.conv, c.chatbot, c.ids, c.lang]
        pool = {"concurrency_id": TURNS, "concurrency_limit": capacity.total + REFUSERS}
        sent = c.send.click(h.respond, ask_inputs, turn, **pool)
        submitted = c.question.submit(h.respond, ask_inputs, turn, **pool)
        again = c.regenerate.click(h.regenerate, [c.conv, c.question, c.lang], turn, **pool)
        more = c.continue_button.click(
            h.continue_answer, [c.conv, c.question, c.lang], turn, **pool
        )
        wrote = c.write_button.click(h.write_answer, [c.conv, c.question, c.lang], turn, **pool)
        # cancel first, then say so: a note written while the answer still streams could be
        # overwritten by the answer's next update
        c.stop.click(None, cancels=[sent, submitted, again, more, wrote]).then(
            h.stopped, [c.chatbot, c.lang], [c.chatbot]
        )

        c.keys.wire(c.lang)
        c.chatbot.like(h.like, [c.ids, c.lang], [c.rated, c.feedback_status])
        c.send_feedback.click(
            h.send_feedback, [c.rated, c.comment, c.lang], [c.comment, c.feedback_status]
        )
    _size_queue(page, capacity.total + REFUSERS + OTHER_EVENTS, queue_size(capacity))
    return page


def _size_queue(page: gr.Blocks, workers: int, max_size: int) -> None:
    """Gradio runs at most ``max_threads`` events at once (40 unless told), all events
    together: a bigger engine needs more, on a thread pool of the page's own. Its queue holds
    at most ``max_size`` events waiting for a worker."""
    page.max_threads = max(workers, page.max_threads)
    page.queue(max_size=max_size)  # the queue takes its worker count when made
