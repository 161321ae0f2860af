"""Printing benchmark results as a plain-text table."""

from __future__ import annotations

from collections.abc import Sequence


def render(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line]
    for n, row in enumerate(cells):
        out.append("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
        if n == 0:
            out.append(line)
    out.append(line)
    return "\n".join(out)


def fmt_ratio(ours: float, base: float) -> str:
    """``ours / base`` to three places; ``-`` where there is no baseline."""
    return f"{ours / base:.3f}" if base else "-"


def yes(ok: bool) -> str:
    """A target's verdict cell."""
    return "yes" if ok else "NO"
