"""The per-conversation chart: TTFT and cache hit % across turns, as inline SVG (pure).

Inline SVG needs no plotting library and no script, and renders offline in any browser.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from ui.i18n import t

WIDTH, HEIGHT, PAD_L, PAD_R, PAD_T, PAD_B = 340, 150, 34, 34, 12, 22


def _x(i: int, n: int) -> float:
    inner = WIDTH - PAD_L - PAD_R
    return PAD_L + (inner * (i + 0.5) / n)


def conversation_chart(points: Sequence[tuple[float, float]], lang: str = "en") -> str:
    """``points`` are (TTFT in seconds, hit %) per turn, oldest first. Bars: TTFT (left axis);
    line with dots: hit % (right axis, 0-100)."""
    if not points:
        return f"<p class='muted'>{html.escape(t(lang, 'chart.none'))}</p>"
    n = len(points)
    plot_h = HEIGHT - PAD_T - PAD_B
    top = max(max(ttft for ttft, _h in points), 0.001)
    bar_w = max(3.0, min(28.0, (WIDTH - PAD_L - PAD_R) / n * 0.6))
    base = PAD_T + plot_h
    shapes: list[str] = []
    for i, (ttft, hit) in enumerate(points):
        h = plot_h * ttft / top
        shapes.append(
            f"<rect class='ttft' x='{_x(i, n) - bar_w / 2:.1f}' y='{base - h:.1f}' "
            f"width='{bar_w:.1f}' height='{h:.1f}' rx='2'>"
            f"<title>{i + 1}: {ttft:.2f} s, {hit:.0f}%</title></rect>"
        )
    line = " ".join(
        f"{_x(i, n):.1f},{base - plot_h * min(100.0, hit) / 100:.1f}"
        for i, (_t, hit) in enumerate(points)
    )
    shapes.append(f"<polyline class='hit' points='{line}' fill='none'/>")
    for i, (_t, hit) in enumerate(points):
        y = base - plot_h * min(100.0, hit) / 100
        shapes.append(f"<circle class='hit' cx='{_x(i, n):.1f}' cy='{y:.1f}' r='3'/>")
    step = max(1, n // 8)
    labels = "".join(
        f"<text x='{_x(i, n):.1f}' y='{HEIGHT - 6}' text-anchor='middle'>{i + 1}</text>"
        for i in range(0, n, step)
    )
    axes = (
        f"<text x='{PAD_L - 4}' y='{PAD_T + 8}' text-anchor='end'>{top:.1f}</text>"
        f"<text x='{PAD_L - 4}' y='{base}' text-anchor='end'>0</text>"
        f"<text x='{WIDTH - PAD_R + 4}' y='{PAD_T + 8}'>100</text>"
        f"<text x='{WIDTH - PAD_R + 4}' y='{base}'>0</text>"
        f"<line x1='{PAD_L}' y1='{base}' x2='{WIDTH - PAD_R}' y2='{base}' class='axis'/>"
    )
    title = html.escape(f"{t(lang, 'chart.ttft')} / {t(lang, 'chart.hit')}")
    legend = (
        f"<div class='legend'><span class='dot ttft'></span>{html.escape(t(lang, 'chart.ttft'))}"
        f" <span class='dot hit'></span>{html.escape(t(lang, 'chart.hit'))}"
        f" <small>({html.escape(t(lang, 'chart.turn'))} 1–{n})</small></div>"
    )
    return (
        f"<svg class='turn-chart' role='img' aria-label='{title}' viewBox='0 0 {WIDTH} {HEIGHT}' "
        f"width='100%' preserveAspectRatio='xMidYMid meet'>{axes}{''.join(shapes)}{labels}</svg>"
        f"{legend}"
    )
