"""The log out button of the Gradio pages: a small form that posts to ``/logout`` (signing out
changes state, so it is never a link), styled like a small Gradio button. Plain HTML: it needs
no script."""

from __future__ import annotations

import html

import gradio as gr

_STYLE = (
    "cursor:pointer;white-space:nowrap;"
    "padding:var(--button-small-padding);font-size:var(--button-small-text-size);"
    "border-radius:var(--button-small-radius);"
    "border:var(--button-border-width) solid var(--button-secondary-border-color);"
    "background:var(--button-secondary-background-fill);"
    "color:var(--button-secondary-text-color)"
)


def logout_form(label: str, button_id: str = "logout") -> str:
    """The form's HTML; the button reads ``label`` and has the id ``button_id``."""
    return (
        '<form method="post" action="/logout" style="margin:0">'
        f'<button type="submit" id="{html.escape(button_id)}" style="{_STYLE}">'
        f"{html.escape(label)}</button></form>"
    )


def logout_button(label: str, button_id: str = "logout") -> gr.HTML:
    """The form as a component (call inside ``gr.Blocks``); update it with ``logout_form``."""
    return gr.HTML(
        logout_form(label, button_id),
        js_on_load=None,
        scale=0,
        min_width=100,
        elem_id=f"{button_id}-form",
    )
