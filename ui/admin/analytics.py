"""Usage tab: questions per day and per user, and the feedback ratio."""

from __future__ import annotations

import gradio as gr
import pandas as pd

from appliance.core.auth.service import AuthService
from appliance.core.services.admin import AdminConsole
from ui.admin.common import Loader, table
from ui.session import require_admin

DAYS = 30


def feedback_markdown(feedback: dict) -> str:
    if feedback["ratio"] is None:
        return "**Feedback:** no votes yet."
    return (
        f"**Feedback:** {100 * feedback['ratio']:.0f}% helpful "
        f"({feedback['up']} 👍, {feedback['down']} 👎)"
    )


def goodput_markdown(g: dict) -> str:
    if not g["answers"]:
        return f"**Goodput (last {g['hours']:.0f} h):** no timed answers yet."
    share = g["good_tokens"] / g["output_tokens"] if g["output_tokens"] else 0.0
    text = (
        f"**Goodput (last {g['hours']:.0f} h):** {g['good_tokens']:,} of {g['output_tokens']:,} "
        f"output tokens ({100 * share:.0f}%) in {g['answers_met']} of {g['answers']} answers met "
        f"TTFT ≤ {g['slo_ttft_s']:g} s and ITL ≤ {1000 * g['slo_itl_s']:.0f} ms"
    )
    if g["cost_per_million"] is not None:
        text += f" · cost per million effective tokens **{g['cost_per_million']:,.2f}**"
    return text


def build_analytics_tab(console: AdminConsole, auth: AuthService) -> Loader:
    analytics = console.analytics

    def load(request: gr.Request):  # noqa: ANN202
        require_admin(request, auth)
        per_day = pd.DataFrame(analytics.questions_per_day(DAYS), columns=["day", "questions"])
        return (
            per_day,
            table(analytics.questions_per_user(DAYS), ("user", "questions")),
            feedback_markdown(analytics.feedback())
            + "\n\n"
            + goodput_markdown(analytics.goodput()),
        )

    with gr.Tab("Usage", id="usage"):
        feedback = gr.Markdown(elem_id="feedback")
        per_day = gr.BarPlot(
            pd.DataFrame({"day": [], "questions": []}),
            x="day",
            y="questions",
            x_label_angle=-45,
            sort="x",
            title=f"Questions per day (last {DAYS} days)",
            height=240,
            elem_id="chart-questions",
        )
        per_user = gr.Dataframe(table([], ("user", "questions")), label="Questions per user")
        refresh = gr.Button("Refresh", size="sm")
    outputs = [per_day, per_user, feedback]
    refresh.click(load, None, outputs)
    return Loader(load, outputs)
