"""Turning service results into Markdown for the chat page (pure)."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from typing import Any

from rag.prompt import chunk_header


def citations_markdown(citations: Iterable[Mapping[str, Any]]) -> str:
    items = []
    for c in citations:
        header = html.escape(chunk_header(c["title"], c["section"], c["page"]))
        text = html.escape(c["text"].strip())
        items.append(
            f"<details class='citation'><summary><b>[{c['number']}]</b> {header} "
            f"<small>({html.escape(c['source'])})</small></summary>\n\n<mark>{text}</mark>\n</details>"
        )
    return "\n".join(items) if items else "_No sources yet._"


def panel_markdown(stats: Mapping[str, Any] | None) -> str:
    """The per-answer speed and cache panel."""
    if not stats:
        return "_Ask a question to see how fast it was answered._"
    prompt = stats.get("prompt_tokens") or 0
    cached = stats.get("cached_tokens") or 0
    hit = 100.0 * cached / prompt if prompt else 0.0
    completion = stats.get("completion_tokens") or 0
    ttft_ms = stats.get("ttft_ms") or 0.0
    e2e_ms = stats.get("e2e_ms") or 0.0
    decode_s = (e2e_ms - ttft_ms) / 1000
    tps = (completion - 1) / decode_s if completion > 1 and decode_s > 0 else 0.0
    rows = [
        ("TTFT", f"{ttft_ms / 1000:.2f} s"),
        ("Total", f"{e2e_ms / 1000:.2f} s"),
        ("Tokens/s", f"{tps:.1f}"),
        ("Prompt tokens", f"{prompt}"),
        ("Cached tokens", f"{cached} ({hit:.0f}%)"),
        ("Answer tokens", f"{completion}"),
        ("Retrieval", f"{stats.get('retrieval_ms') or 0:.0f} ms"),
    ]
    body = "\n".join(f"| {k} | <span class='panel-value'>{v}</span> |" for k, v in rows)
    return "| Metric | Value |\n|---|---|\n" + body


def stats_row(stats: Any, retrieval_ms: float) -> dict[str, float]:
    """A ``GenerationStats`` as the flat mapping ``panel_markdown`` reads."""
    return {
        "prompt_tokens": stats.prompt_tokens,
        "cached_tokens": stats.cached_tokens,
        "completion_tokens": stats.completion_tokens,
        "ttft_ms": stats.ttft_s * 1000,
        "e2e_ms": stats.e2e_s * 1000,
        "retrieval_ms": retrieval_ms,
    }
