"""The browser sessions' part of ``appliance bench load``'s report: each session's turns, the
outcome counts, how many answers streamed at once, and the exit code they give."""

from __future__ import annotations

from appliance.bench.load_browser import CLEAR_OUTCOMES, OUTCOMES, BrowserRun, at_once
from appliance.bench.table import render


def _after(moment: float | None, sent: float) -> str:
    return "-" if moment is None or not sent else f"{moment - sent:.1f} s"


def browser_tables(run: BrowserRun) -> str:
    """Every browser session's turns (outcome, when the answer began and ended after the
    question was sent, the first waiting note), the outcome counts and the overlap."""
    rows: list[list[object]] = []
    for plan in run.plans:
        if plan.error:
            rows.append([plan.index, plan.username, "-", "error", "-", "-", plan.error[:60]])
        for n, t in enumerate(plan.turns, 1):
            note = (t.waiting or t.detail)[:60]  # where it was when it joined the line
            began, ended = _after(t.first, t.sent), _after(t.ended, t.sent)
            rows.append([plan.index, plan.username, n, t.outcome, began, ended, note])
    turns = [t for plan in run.plans for t in plan.turns]
    counts = {k: sum(t.outcome == k for t in turns) for k in OUTCOMES}
    counts["error"] += sum(1 for plan in run.plans if plan.error)  # could not sign in
    peak = at_once(turns)
    summary: list[list[object]] = [[f"browser turns {k}", v] for k, v in counts.items()]
    summary += [
        ["browser turns that waited (told their place)", sum(bool(t.waiting) for t in turns)],
        ["answers streaming at once (most)", peak],
        ["answers overlapped in time", "yes" if peak >= 2 else "no"],
    ]
    head = ["session", "user", "turn", "outcome", "answer began", "ended", "first wait / detail"]
    return "\n".join(
        [
            f"browser sessions: {len(run.plans)} Chromium pages through the chat page",
            render(head, rows),
            render(["browsers", "value"], summary),
        ]
    )


def browsers_rc(run: BrowserRun) -> int:
    """0 when every browser turn ended in a way its user understood, else 1."""
    turns = [t for plan in run.plans for t in plan.turns]
    clear = all(t.outcome in CLEAR_OUTCOMES for t in turns)
    return 0 if clear and not any(plan.error for plan in run.plans) else 1
