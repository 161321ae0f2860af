"""The API keys panel: a user creates, lists and revokes their own keys for ``/v1``, and may
change their own password there (the keys keep working; their other sessions end)."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import gradio as gr

from appliance.core.auth.api_keys import ApiKeyError, ApiKeyInfo
from appliance.core.auth.client_address import client_address
from appliance.core.auth.service import AuthError, AuthService, PasswordThrottled, WrongPassword
from appliance.core.auth.throttle import whole_seconds
from ui.i18n import t
from ui.login.routes import SESSION_COOKIE
from ui.session import require_principal


def keys_markdown(keys: list[ApiKeyInfo], lang: str, new_key: str | None = None) -> str:
    lines = []
    if new_key:
        lines.append(f"{t(lang, 'keys.created')}\n\n`{new_key}`\n")
    for k in keys:
        state = f" — _{t(lang, 'keys.revoked')}_" if k.revoked else ""
        lines.append(f"- **{html.escape(k.name)}** `{k.prefix}…`{state}")
    return "\n".join(lines) or t(lang, "keys.none")


class KeysPanel:
    """Components and handlers; ``labelled`` feeds the page's language switch."""

    def __init__(self, auth: AuthService, lang: str = "en") -> None:
        self.auth = auth
        with gr.Accordion(t(lang, "keys.heading"), open=False, elem_id="api-keys") as self.box:
            self.intro = gr.Markdown("")
            self.name = gr.Textbox(label=t(lang, "keys.name"), max_lines=1, elem_id="key-name")
            self.create = gr.Button(t(lang, "keys.create"), size="sm", elem_id="create-key")
            self.listing = gr.Markdown("", elem_id="key-list")
            self.pick = gr.Dropdown([], label=t(lang, "keys.pick"), elem_id="key-pick")
            self.revoke = gr.Button(t(lang, "keys.revoke"), size="sm", variant="stop")
            self.password = PasswordForm(auth, lang)

    def labelled(self) -> list[tuple[gr.components.Component, Callable[[str], dict]]]:
        return [
            (self.box, lambda lang: gr.update(label=t(lang, "keys.heading"))),
            (self.name, lambda lang: gr.update(label=t(lang, "keys.name"))),
            (self.create, lambda lang: gr.update(value=t(lang, "keys.create"))),
            (self.pick, lambda lang: gr.update(label=t(lang, "keys.pick"))),
            (self.revoke, lambda lang: gr.update(value=t(lang, "keys.revoke"))),
            *self.password.labelled(),
        ]

    def _show(self, request: gr.Request, lang: str, new_key: str | None = None) -> list[Any]:
        principal = require_principal(request, self.auth)
        keys = self.auth.api_keys.list(principal)
        live = [(f"{k.name} ({k.prefix}…)", k.id) for k in keys if not k.revoked]
        base = str(request.base_url).rstrip("/") if request else ""
        return [
            t(lang, "keys.intro", base=base),
            keys_markdown(keys, lang, new_key),
            gr.update(choices=live, value=None),
        ]

    def wire(self, lang_state: gr.State) -> None:
        outputs = [self.intro, self.listing, self.pick]

        def show(lang: str, request: gr.Request) -> list[Any]:
            return self._show(request, lang)

        def create(name: str, lang: str, request: gr.Request) -> list[Any]:
            principal = require_principal(request, self.auth)
            try:
                key, _info = self.auth.api_keys.create(principal, name)
            except ApiKeyError as exc:
                raise gr.Error(str(exc)) from exc
            return ["", *self._show(request, lang, key)]

        def revoke(key_id: int | None, lang: str, request: gr.Request) -> list[Any]:
            principal = require_principal(request, self.auth)
            if key_id is not None:
                try:
                    self.auth.api_keys.revoke(principal, int(key_id))
                except ApiKeyError as exc:
                    raise gr.Error(str(exc)) from exc
            return self._show(request, lang)

        self.box.expand(show, [lang_state], outputs)
        self.create.click(create, [self.name, lang_state], [self.name, *outputs])
        self.revoke.click(revoke, [self.pick, lang_state], outputs)
        self.password.wire(lang_state)


class PasswordForm:
    """Change one's own password: the current one, the new one, and what happened."""

    def __init__(self, auth: AuthService, lang: str) -> None:
        self.auth = auth
        self.heading = gr.Markdown(f"#### {t(lang, 'password.heading')}")
        self.note = gr.Markdown(t(lang, "password.note"), elem_id="password-note")
        self.current = gr.Textbox(
            label=t(lang, "password.current"),
            type="password",
            max_lines=1,
            elem_id="current-password",
        )
        self.new = gr.Textbox(
            label=t(lang, "password.new"), type="password", max_lines=1, elem_id="new-password"
        )
        self.submit = gr.Button(t(lang, "password.submit"), size="sm", elem_id="change-password")
        self.status = gr.Markdown("", elem_id="password-status")

    def labelled(self) -> list[tuple[gr.components.Component, Callable[[str], dict]]]:
        return [
            (self.heading, lambda lang: gr.update(value=f"#### {t(lang, 'password.heading')}")),
            (self.note, lambda lang: gr.update(value=t(lang, "password.note"))),
            (self.current, lambda lang: gr.update(label=t(lang, "password.current"))),
            (self.new, lambda lang: gr.update(label=t(lang, "password.new"))),
            (self.submit, lambda lang: gr.update(value=t(lang, "password.submit"))),
        ]

    def _change(self, current: str, new: str, lang: str, request: gr.Request) -> str:
        require_principal(request, self.auth)
        if len(new) < 8:
            return t(lang, "password.short")
        if new == current:
            return t(lang, "password.same")
        token = request.cookies.get(SESSION_COOKIE) or ""
        client = client_address(request)
        try:
            change = self.auth.change_password(token, current, new, client)
        except PasswordThrottled as exc:
            return t(lang, "login.locked", seconds=whole_seconds(exc.retry_after))
        except WrongPassword:
            return t(lang, "password.wrong")
        except AuthError as exc:
            raise gr.Error(str(exc)) from exc
        return t(lang, "password.changed", count=change.sessions_ended)

    def wire(self, lang_state: gr.State) -> None:
        def change(current: str, new: str, lang: str, request: gr.Request) -> list[str]:
            return ["", "", self._change(current, new, lang, request)]

        inputs = [self.current, self.new, lang_state]
        self.submit.click(change, inputs, [self.current, self.new, self.status])
