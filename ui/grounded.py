"""A grounded answer as the chat shows it (pure): the "From the documents" card above the
generated text, unsupported sentences marked, citations that point nowhere flagged, and the
evidence sentences highlighted in their sources.

Inputs are the JSON shapes the services store and the APIs return (``appliance.api.grounded``):
card sentences ``{number, chunk_id, start, end, text, score}`` (offsets into the chunk's text)
and verdicts ``{start, end, supported, cites, unsupported_facts, reason, claim}`` (offsets into
the answer).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from typing import Any

from ui.evidence_marks import Card, anchored
from ui.format import link_citations
from ui.i18n import t
from ui.markdown_text import literal


def card_markdown(card: Card, lang: str) -> str:
    """The card as Markdown: a heading and each sentence quoted verbatim, its ``[n]`` a link
    that opens the source on that sentence. A sentence is the documents' text, shown as text
    (``literal``): a link, image, tag or emphasis in a document is never markup in the card."""
    if not card:
        return ""
    lines = [f"> **{t(lang, 'card.title')}**"]
    for s, anchor in anchored(card):
        lines.append(f"> “{literal(str(s['text']))}” [\\[{int(s['number'])}\\]](#{anchor})")
    return "\n>\n".join(lines)


def _flag(segment: str, tip: str) -> str:
    return (
        f"<span class='unsupported' title='{html.escape(tip, quote=True)}'>{segment}</span>"
        f"<sup class='unsupported-mark' title='{html.escape(tip, quote=True)}'>⚠</sup>"
    )


def flagged_answer(answer: str, verification: Mapping[str, Any] | None, lang: str) -> str:
    """The answer with each unsupported sentence marked (a tooltip says what was not found in
    the sources) and each ``[n]`` that names no source of the conversation flagged."""
    if not verification:
        return answer
    out, at = [], 0
    for v in sorted(verification.get("sentences", []), key=lambda v: v["start"]):
        if v.get("supported", True) or not v.get("claim", True) or v["start"] < at:
            continue
        facts = ", ".join(v.get("unsupported_facts") or ())
        tip = t(lang, "verify.facts", facts=facts) if facts else t(lang, "verify.unsupported")
        out += [answer[at : v["start"]], _flag(answer[v["start"] : v["end"]], tip)]
        at = v["end"]
    text = "".join([*out, answer[at:]])
    for n in verification.get("bad_markers", []):
        tip = html.escape(t(lang, "verify.bad_marker", n=n), quote=True)
        text = text.replace(f"[{n}]", f"<span class='bad-cite' title='{tip}'>[{n}]</span>")
    return text


def answer_bubble(
    answer: str,
    numbers: Iterable[int],
    lang: str,
    card: Card = (),
    verification: Mapping[str, Any] | None = None,
    mode: str | None = None,
) -> str:
    """What the chat bubble shows: the card, then the checked answer with linked citations
    (in ``extractive`` mode the card is the answer, so it is shown once)."""
    head = card_markdown(card, lang)
    if mode == "extractive" and head:
        return head
    body = link_citations(flagged_answer(answer, verification, lang), numbers)
    return f"{head}\n\n{body}" if head and body else head or body


def verified_line(verification: Mapping[str, Any] | None, lang: str) -> str | None:
    """ "supported: 3 of 4 claims": how many of the answer's claims (sentences that state
    something; a restated question or a courtesy is not one) a source it cites says (None
    when the answer was not checked or claims nothing)."""
    if not verification or not verification.get("total"):
        return None
    return t(lang, "verify.count", ok=verification["supported"], total=verification["total"])
