"""Sign-in tab: the LDAP / Active Directory and OpenID Connect providers and the group mapping
(``AdminDirectory``), one form per section built from its config fields, with "Save" and
"Test connection". Secrets are write-only: the field shows ``(set)`` and a new value replaces
the stored one."""

from __future__ import annotations

from typing import Any

import gradio as gr

from appliance.core.auth.service import AuthService
from appliance.core.services.admin import AdminConsole
from appliance.core.services.admin.directory import AdminDirectory
from appliance.core.services.directory_settings import SECRETS, SECTIONS, DirectorySettingsError
from ui.admin.common import Loader
from ui.session import require_admin

TITLES = {
    "ldap": "LDAP / Active Directory",
    "oidc": "OpenID Connect",
    "directory": "Groups → role and collections",
}


def _field(section: str, key: str) -> gr.components.Component:
    info = SECTIONS[section].model_fields[key]
    label, kind = f"{section}.{key}", info.annotation
    elem_id = f"dir-{section}-{key}"
    if kind is bool:
        return gr.Checkbox(label=label, elem_id=elem_id)
    if kind in (int, float):
        return gr.Number(label=label, elem_id=elem_id)
    if key in SECRETS[section]:
        return gr.Textbox(label=label, type="password", elem_id=elem_id, placeholder="(not set)")
    return gr.Textbox(label=label, lines=3 if key == "group_collections" else 1, elem_id=elem_id)


def _section(directory: AdminDirectory, auth: AuthService, section: str) -> list[Any]:
    keys = list(SECTIONS[section].model_fields)
    with gr.Accordion(TITLES[section], open=section != "directory"):
        fields = [_field(section, key) for key in keys]
        with gr.Row():
            save = gr.Button("Save", size="sm", elem_id=f"dir-{section}-save")
            test = (
                gr.Button("Test connection", size="sm", elem_id=f"dir-{section}-test")
                if section != "directory"
                else None
            )
        note = gr.Markdown(elem_id=f"dir-{section}-note")

    key_of = dict(zip(fields, keys, strict=True))

    def on_save(data: dict, request: gr.Request) -> tuple[Any, ...]:
        """``data``: the section's fields (Gradio passes a set of inputs as one dict)."""
        who = require_admin(request, auth)
        values = {key_of[component]: value for component, value in data.items()}
        try:
            directory.save(section, values, who.username)
        except DirectorySettingsError as exc:
            return (*(values.get(k) for k in keys), f"Not saved: {exc}")
        form = directory.form(section)
        return (*(form[k] for k in keys), "Saved; the next sign-in uses it.")

    save.click(on_save, set(fields), [*fields, note])
    if test is not None:

        def on_test(request: gr.Request) -> str:
            who = require_admin(request, auth)
            ok, detail = directory.test(section, who.username)
            return f"{'OK' if ok else 'Failed'}: {detail}"

        test.click(on_test, None, note)
    return [fields, keys]


def build_directory_tab(console: AdminConsole, auth: AuthService) -> Loader | None:
    """The tab, or None where the appliance was built without directory settings."""
    directory = console.directory
    if directory is None:
        return None
    with gr.Tab("Sign-in", id="sign-in"):
        gr.Markdown(
            "Staff sign in with the company directory; local accounts (the admin's among "
            "them) always sign in with their own password. Group changes apply at the next "
            "sign-in; a disabled directory account stops at its next account check."
        )
        parts = [_section(directory, auth, name) for name in SECTIONS]

    outputs = [f for fields, _ in parts for f in fields]

    def load(request: gr.Request) -> list[Any]:
        require_admin(request, auth)
        values: list[Any] = []
        for name, (_, keys) in zip(SECTIONS, parts, strict=True):
            form = directory.form(name)
            values += [form[k] for k in keys]
        return values

    return Loader(load, outputs)
