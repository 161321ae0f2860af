"""Small shared pieces of the admin tabs (pure)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gradio as gr
import pandas as pd


@dataclass(frozen=True)
class Loader:
    """A tab's data loader: run once the admin check on page load has passed."""

    fn: Callable[..., Any]
    outputs: Sequence[gr.components.Component]


def table(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> pd.DataFrame:
    """Rows as a DataFrame with exactly ``columns`` (an empty table keeps its headers)."""
    return pd.DataFrame([{c: r.get(c, "") for c in columns} for r in rows], columns=list(columns))


def csv_list(text: str | None) -> list[str]:
    """``"hr, it"`` -> ``["hr", "it"]``."""
    return [part.strip() for part in (text or "").split(",") if part.strip()]
