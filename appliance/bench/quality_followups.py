"""``appliance bench quality --follow-ups``: the quality of follow-ups under each prompt layout
(``rag.layout``), side by side in one run.

The questions of ``qa.json`` are paired into two-turn conversations (same language, the same
gold document where the file has two, else the next topic). The first question is asked once,
in the default mode, appended (a first turn is laid out the same way under every layout); its
follow-up is then asked once per row, each time replacing the one before through
``ChatService.regenerate``, so that every row answers the same follow-up after the same first
turn and only its layout and mode differ:

1. ``append, generative`` / ``re-lay, generative``: the model's text, after the first turn's
   prompt as sent (its documents included), or after the system prompt and this turn's
   documents, with the first turn as its question and answer only;
2. ``append, grounded`` / ``re-lay, grounded``: the same, with the evidence card first.

``relevance`` order, no cache riders, the engine's cache flushed before every ask (as the mode
rows of ``appliance bench quality``); the row order rotates from conversation to conversation.
Each follow-up is scored as a question of its own (``appliance.bench.quality_score``; an
invention is a fact in none of the sources the conversation has shown, the first turn's and
its own, which is what its answer is checked against), and each pair of rows (append against
re-lay, one mode) question by question.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import Any

from appliance.bench.quality_ask import collect, failed
from appliance.bench.quality_report import CONTROLS, Row, notable
from appliance.bench.quality_score import SUMMARY_HEADERS, Outcome, korean, share, summary_row
from appliance.bench.table import render, yes

MODES = ("generative", "grounded")
LAYOUT_LABELS = {"append": "append", "relay": "re-lay"}


def follow_up_rows(defaults: Any) -> list[Row]:  # noqa: ANN401
    """Both layouts in both generating modes, under the configured repetition controls."""
    controls = {k: getattr(defaults, k) for k in CONTROLS}
    return [
        Row(f"{LAYOUT_LABELS[layout]}, {mode}", {"layout": layout, "answer_mode": mode, **controls})
        for mode in MODES
        for layout in LAYOUT_LABELS
    ]


def conversations(items: Sequence[dict]) -> list[tuple[dict, dict]]:
    """The items as (first question, follow-up) pairs: by language, then by gold document, in
    the file's order within each; an odd one out is left over."""
    ordered = sorted(items, key=lambda i: (korean(i), i["gold_file"]))  # stable: file order
    out = []
    for _lang, group in groupby(ordered, key=korean):
        same = list(group)
        out += [(same[i], same[i + 1]) for i in range(0, len(same) - 1, 2)]
    return out


def run_follow_ups(
    app: Any,  # noqa: ANN401
    pairs: Sequence[tuple[dict, dict]],
    the_rows: Sequence[Row],
    base: dict[str, Any],
) -> dict[str, list[Outcome]]:
    """Every follow-up under every row; a first turn that fails leaves its follow-up failed
    in every row."""
    principal = app.auth.principal_for(app.config.bootstrap.admin_username)
    out: dict[str, list[Outcome]] = {r.label: [] for r in the_rows}
    opening = {**base, "layout": "append", "answer_mode": app.settings.defaults.answer_mode}
    for n, (first, follow) in enumerate(pairs):
        for question in (first["question"], follow["question"]):
            app.knowledge.hybrid.query_vector(question)  # embedded once, up front
        app.settings.update("bench", opening)
        app.engine.flush_cache()
        opened: list[int] = []
        shown: list[str] = []  # the first turn's sources: the follow-up is checked against them
        ask = lambda q=first["question"]: app.chat.ask(principal, q)  # noqa: E731
        started = collect(first, ask, opened, shown=shown)
        k = n % len(the_rows)
        for i, row in enumerate([*the_rows[k:], *the_rows[:k]]):
            if started.error:
                out[row.label].append(failed(follow, f"its first turn failed: {started.error}"))
                continue
            app.settings.update("bench", {**base, **row.changes})
            app.engine.flush_cache()
            conv = opened[0]
            if i == 0:  # the follow-up, then the same follow-up again in place of it
                turn = lambda q=follow["question"], c=conv: app.chat.ask(principal, q, c)  # noqa: E731
            else:
                turn = lambda c=conv: app.chat.regenerate(principal, c)  # noqa: E731
            outcome = collect(follow, turn, earlier=shown)
            sent = _last_layout(app, conv)
            if not outcome.error and sent != row.changes["layout"]:  # the row must be honest
                outcome = failed(follow, f"sent {sent}, not {row.changes['layout']}")
            out[row.label].append(outcome)
    return out


def _last_layout(app: Any, conversation_id: int) -> str | None:  # noqa: ANN401
    """The layout the conversation's last answer was sent with, as stored."""
    from sqlalchemy import select

    from appliance.core.db.models import Message

    with app.db.session() as s:
        return s.scalars(
            select(Message.layout)
            .where(Message.conversation_id == conversation_id, Message.role == "assistant")
            .order_by(Message.id.desc())
            .limit(1)
        ).first()


def follow_up_report(results: dict[str, list[Outcome]], pairs: int) -> list[str]:
    """The EN and KO tables, append against re-lay question by question per mode, the
    targets (re-lay loses nothing against append-only), and each loop, invention or error."""
    out = [f"{pairs} two-turn conversations; each follow-up scored under every row"]
    for lang, is_ko in (("English", False), ("Korean", True)):
        table = [
            summary_row(label, [o for o in outs if o.korean == is_ko])
            for label, outs in results.items()
        ]
        out += [f"{lang} follow-ups", render(SUMMARY_HEADERS, table)]
    paired, met = [], []
    for mode in MODES:
        append, relay = results[f"append, {mode}"], results[f"re-lay, {mode}"]
        both = [(a, r) for a, r in zip(append, relay, strict=True) if not (a.error or r.error)]
        for what in ("shown_first", "anywhere"):
            a_only = sum(getattr(a, what) and not getattr(r, what) for a, r in both)
            r_only = sum(getattr(r, what) and not getattr(a, what) for a, r in both)
            same = sum(getattr(a, what) and getattr(r, what) for a, r in both)
            paired.append((mode, what.replace("_", " "), str(same), str(a_only), str(r_only)))
            met.append(
                (
                    f"re-lay >= append, fact {what.replace('_', ' ')} ({mode})",
                    f"{share(same + r_only, len(both))} vs {share(same + a_only, len(both))}",
                    yes(r_only >= a_only),
                )
            )
    out.append(render(("mode", "fact", "both layouts", "append only", "re-lay only"), paired))
    invented = sum(len(o.inventions) for outs in results.values() for o in outs)
    looped = sum(o.looped for outs in results.values() for o in outs)
    errors = sum(bool(o.error) for outs in results.values() for o in outs)
    met += [
        ("0 unflagged inventions (every row)", str(invented), yes(invented == 0)),
        ("0 loops (every row)", str(looped), yes(looped == 0)),
        ("no failed turns", str(errors), yes(errors == 0)),
    ]
    out.append(render(("target", "measured", "met"), met))
    return out + notable(results)
