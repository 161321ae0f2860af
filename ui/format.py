"""Service results as HTML for the chat page: numbered sources and the per-answer panel (pure).

Everything here escapes what it shows; nothing loads an external asset.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from appliance.core.services.conversations import TurnStats
from ui.evidence_marks import highlight_chunk
from ui.i18n import t


def ocr_label(confidence: float, lang: str) -> str:
    """'read by OCR, 93% confidence' for a chunk whose text OCR read (confidence 0..1)."""
    return t(lang, "sources.ocr", confidence=round(confidence * 100))


def _source_line(c: Mapping[str, Any], lang: str) -> str:
    parts = [html.escape(c["title"])]
    if c.get("section"):
        parts.append(html.escape(c["section"]))
    if c.get("page") is not None:
        parts.append(html.escape(t(lang, "sources.page", page=c["page"])))
    return " · ".join(parts)


# words of a chunk's opening that tell it from another chunk of the same section
_MIN_WORDS, _MAX_WORDS, _MAX_OPENING_CHARS = 6, 16, 80
# Markdown a chunk may open with (headings, list and quote marks), not worth showing
_LEADING_MARKS = re.compile(r"^[\s#>*+\-|]+")


def _place(c: Mapping[str, Any]) -> tuple:
    """Where a source sits: two citations of one place read the same in the list."""
    return (c["title"], c.get("section") or "", c.get("page"), c["source"])


def _opening(words: list[str], n: int) -> str:
    text = " ".join(words[:n])
    return text if len(text) <= _MAX_OPENING_CHARS else text[:_MAX_OPENING_CHARS].rstrip()


def openings(texts: list[str]) -> list[str]:
    """For chunks of one place, each chunk's first words: as few as tell it from the others
    (at least six), so that "[1]" and "[4]" of one section can be told apart in the list."""
    words = [_LEADING_MARKS.sub("", " ".join(t.split())).split() for t in texts]
    for n in range(_MIN_WORDS, _MAX_WORDS + 1):
        shown = [_opening(w, n) for w in words]
        if len(set(shown)) == len(shown):
            break
    return shown


def _distinguished(cited: list[Mapping[str, Any]], lang: str) -> dict[int, str]:
    """Citation number -> the words that tell it from the others of its place (only for
    places cited more than once)."""
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for c in cited:
        groups.setdefault(_place(c), []).append(c)
    out: dict[int, str] = {}
    for group in groups.values():
        if len(group) > 1:
            for c, start in zip(group, openings([c["text"] for c in group]), strict=True):
                out[c["number"]] = t(lang, "sources.starts", start=start)
    return out


def citations_html(
    citations: Iterable[Mapping[str, Any]],
    lang: str = "en",
    evidence: Sequence[Mapping[str, Any]] = (),
) -> str:
    """One collapsible entry per numbered source: the title, section and page (and, where one
    place is cited more than once, each chunk's opening words), and, opened, the chunk's text
    highlighted (the exact text the model was given), with the evidence card's sentences
    marked in it (``ui.grounded.highlight_chunk``); a source the reader may no longer read
    (``withheld``) says so instead of its text."""

    items = []
    cited = sorted(citations, key=lambda c: c["number"])
    starts = _distinguished(cited, lang)
    for c in cited:
        text = highlight_chunk(c["text"], c["number"], evidence)
        if c.get("withheld"):  # its collection is no longer the reader's: no text is shown
            text = html.escape(t(lang, "sources.withheld"))
        start = (
            f" <span class='opening'>· {html.escape(starts[c['number']])}</span>"
            if c["number"] in starts
            else ""
        )
        # a cache rider: sent along because the engine had it cached, not retrieved in top-k
        rider = (
            f" <small class='rider'>· {html.escape(t(lang, 'sources.rider'))}</small>"
            if c.get("rider")
            else ""
        )
        # text read by OCR from a scan or a photo: it may hold misread characters
        ocr = (
            f" <small class='ocr'>· {html.escape(ocr_label(c['ocr_confidence'], lang))}</small>"
            if c.get("ocr_confidence") is not None
            else ""
        )
        items.append(
            f"<details class='citation' id='source-{c['number']}'>"
            f"<summary><b class='cite-no'>[{c['number']}]</b> {_source_line(c, lang)}{start} "
            f"<small>({html.escape(c['source'])})</small>{rider}{ocr}</summary>"
            f"<mark class='chunk'>{text}</mark></details>"
        )
    if not items:
        return f"<p class='muted'>{html.escape(t(lang, 'sources.none'))}</p>"
    return "<div class='sources'>" + "".join(items) + "</div>"


# code (fenced blocks, inline spans) is shown as written: no links inside it
_CODE = re.compile(r"(```[\s\S]*?(?:```|$)|`[^`\n]*`)")
# a bracketed number that is not already a link's text or the start of one
_CITE = re.compile(r"(?<![\[\\])\[(\d{1,4})\](?![(\[])")


def link_citations(answer: str, numbers: Iterable[int]) -> str:
    """The answer's Markdown with each ``[n]`` that names a listed source turned into a link to
    it (``#source-n``; the page's script opens and scrolls to the entry)."""
    known = {int(n) for n in numbers}
    if not known:
        return answer

    def link(m: re.Match[str]) -> str:
        n = int(m.group(1))
        return f"[\\[{n}\\]](#source-{n})" if n in known else m.group(0)

    parts = _CODE.split(answer)
    # odd indices are the code pieces the split kept
    return "".join(p if i % 2 else _CITE.sub(link, p) for i, p in enumerate(parts))


def _bar(parts: list[tuple[float, str, str]]) -> str:
    """A stacked horizontal bar: (value, css class, tooltip) segments, widths by share."""
    total = sum(v for v, _c, _t in parts) or 1.0
    segs = "".join(
        f"<span class='seg {cls}' style='width:{100 * v / total:.1f}%' title='{html.escape(tip)}'>"
        "</span>"
        for v, cls, tip in parts
        if v > 0
    )
    return f"<div class='bar'>{segs}</div>"


def _predicted(stats: TurnStats) -> str:
    """What the cache shadow predicted before sending, and how far the engine's report was
    from it ("1,200 (engine: -48)")."""
    if stats.predicted_cached is None:
        return "–"
    off = stats.cached_tokens - stats.predicted_cached
    return f"{stats.predicted_cached:,} ({off:+,})"


def panel_html(
    stats: TurnStats | None,
    chunk_numbers: list[int],
    lang: str = "en",
    verified: str | None = None,
) -> str:
    """The per-answer panel: speed, cache use and retrieval, as numbers and two bars (where
    the time went: retrieval, first token, decoding; and how much of the prompt was cached),
    and ``verified`` ("supported: 3 of 4 claims") where the answer was checked."""
    if stats is None:
        return f"<p class='muted'>{html.escape(t(lang, 'panel.none'))}</p>"
    uncached = max(0, stats.prompt_tokens - stats.cached_tokens)
    rows = [
        ("ttft", t(lang, "panel.ttft"), f"{stats.ttft_ms / 1000:.2f} s"),
        ("total", t(lang, "panel.total"), f"{stats.e2e_ms / 1000:.2f} s"),
        ("tps", t(lang, "panel.tps"), f"{stats.tokens_per_s:.1f}"),
        ("itl", t(lang, "panel.itl"), f"{stats.inter_token_ms:.0f} ms"),
        ("prompt", t(lang, "panel.prompt"), f"{stats.prompt_tokens:,}"),
        ("cached", t(lang, "panel.cached"), f"{stats.cached_tokens:,}"),
        ("hit", t(lang, "panel.hit"), f"{stats.hit_pct:.0f}%"),
        ("answer", t(lang, "panel.answer"), f"{stats.completion_tokens:,}"),
        ("retrieval", t(lang, "panel.retrieval"), f"{stats.retrieval_ms:.0f} ms"),
        (
            "chunks",
            t(lang, "panel.chunks"),
            " ".join(f"[{n}]" for n in chunk_numbers) or "–",
        ),
        ("ordering", t(lang, "panel.ordering"), stats.ordering or "–"),
        ("layout", t(lang, "panel.layout"), stats.layout or "–"),
        ("predicted", t(lang, "panel.predicted"), _predicted(stats)),
    ]
    if verified:
        rows.append(("verified", t(lang, "panel.verified"), verified))
    body = "".join(
        f"<tr data-metric='{key}'><th>{html.escape(label)}</th>"
        f"<td class='panel-value'>{html.escape(value)}</td></tr>"
        for key, label, value in rows
    )
    timeline = _bar(
        [
            (stats.retrieval_ms, "retrieval", t(lang, "panel.retrieval")),
            (stats.ttft_ms, "ttft", t(lang, "panel.ttft")),
            (stats.decode_ms, "decode", t(lang, "panel.decode")),
        ]
    )
    cache = _bar(
        [
            (stats.cached_tokens, "cached", t(lang, "panel.cached")),
            (uncached, "uncached", t(lang, "panel.prompt")),
        ]
    )
    legend = (
        f"<div class='legend'><span class='dot retrieval'></span>"
        f"{html.escape(t(lang, 'panel.retrieval'))} <span class='dot ttft'></span>"
        f"{html.escape(t(lang, 'panel.ttft'))} <span class='dot decode'></span>"
        f"{html.escape(t(lang, 'panel.decode'))}</div>"
        f"{timeline}<div class='legend'><span class='dot cached'></span>"
        f"{html.escape(t(lang, 'panel.cached'))} {stats.hit_pct:.0f}%</div>{cache}"
    )
    return f"<table class='panel'>{body}</table>{legend}"
