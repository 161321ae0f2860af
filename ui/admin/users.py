"""Users tab: accounts, roles, collection access, password resets and API keys."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gradio as gr

from appliance.core.auth.principal import ROLES
from appliance.core.auth.service import AuthService
from appliance.core.services.admin import AdminConsole, AdminError
from appliance.core.services.admin.users import AdminUsers
from ui.admin.common import Loader, csv_list, table
from ui.session import require_admin

USER_COLUMNS = ("username", "role", "status", "source", "collections", "api_keys", "created")
KEY_COLUMNS = ("id", "username", "name", "prefix", "created", "last_used", "status")


def _once(what: str, secret: str) -> str:
    return f"{what}: `{secret}` (shown once: copy it now)"


@dataclass(frozen=True)
class _NewAccount:
    name: gr.Textbox
    password: gr.Textbox
    role: gr.Radio
    collections: gr.Textbox
    button: gr.Button


@dataclass(frozen=True)
class _ManageBox:
    user: gr.Dropdown
    value: gr.Textbox
    buttons: tuple[gr.Button, ...]  # disable, enable, set role, set collections, reset password
    note: gr.Markdown


@dataclass(frozen=True)
class _KeysBox:
    table: gr.Dataframe
    user: gr.Dropdown
    name: gr.Textbox
    create: gr.Button
    key_id: gr.Number
    revoke: gr.Button


def build_users_tab(console: AdminConsole, auth: AuthService) -> Loader:
    users = console.users
    load = _loader(users, auth)
    with gr.Tab("Users", id="users"):  # top to bottom, in creation order
        accounts = gr.Dataframe(table([], USER_COLUMNS), label="Accounts", elem_id="users")
        new = _new_account()
        manage = _manage_box()
        keys = _keys_box()
        refresh = gr.Button("Refresh", size="sm")

    outputs = [accounts, keys.table, manage.user, keys.user]
    note = manage.note
    new_inputs = [new.name, new.password, new.role, new.collections]
    new.button.click(_creator(users, auth), new_inputs, note).success(load, None, outputs)
    for btn, fn in zip(manage.buttons, _account_actions(users, auth), strict=True):
        btn.click(fn, [manage.user, manage.value], note).success(load, None, outputs)
    new_key, revoke = _key_actions(users, auth)
    keys.create.click(new_key, [keys.user, keys.name], note).success(load, None, outputs)
    keys.revoke.click(revoke, keys.key_id, note).success(load, None, outputs)
    refresh.click(load, None, outputs)
    return Loader(load, outputs)


def _new_account() -> _NewAccount:
    with gr.Accordion("New account", open=False), gr.Row():
        name = gr.Textbox(label="Username", elem_id="new-username")
        password = gr.Textbox(label="Password (empty: generate)", type="password")
        role = gr.Radio(list(ROLES), value="staff", label="Role")
        colls = gr.Textbox(label="Collections", placeholder="default, hr")
        button = gr.Button("Create", variant="primary", elem_id="create-user")
    return _NewAccount(name, password, role, colls, button)


def _manage_box() -> _ManageBox:
    with gr.Row():
        user = gr.Dropdown([], label="User", elem_id="manage-user")
        value = gr.Textbox(label="Role or collections", placeholder="admin | hr, it")
    with gr.Row():
        buttons = (
            gr.Button("Disable", variant="stop"),
            gr.Button("Enable"),
            gr.Button("Set role"),
            gr.Button("Set collections"),
            gr.Button("Reset password"),
        )
    note = gr.Markdown(elem_id="users-note")
    return _ManageBox(user, value, buttons, note)


def _keys_box() -> _KeysBox:
    keys = gr.Dataframe(table([], KEY_COLUMNS), label="API keys", elem_id="api-keys")
    with gr.Row():
        user = gr.Dropdown([], label="Key for user")
        name = gr.Textbox(label="Key name")
        create = gr.Button("Create key")
        key_id = gr.Number(label="Key id", precision=0)
        revoke = gr.Button("Revoke", variant="stop")
    return _KeysBox(keys, user, name, create, key_id, revoke)


def _loader(users: AdminUsers, auth: AuthService) -> Callable:
    def load(request: gr.Request):  # noqa: ANN202
        require_admin(request, auth)
        listed = users.list_users()
        names = [u["username"] for u in listed]
        return (
            table(listed, USER_COLUMNS),
            table(users.list_keys(), KEY_COLUMNS),
            gr.Dropdown(choices=names),
            gr.Dropdown(choices=names),
        )

    return load


def _creator(users: AdminUsers, auth: AuthService) -> Callable[..., str]:
    def create(name: str, password: str, role: str, colls: str, request: gr.Request) -> str:
        who = require_admin(request, auth)
        try:
            secret = users.create(who.username, name, password, role, csv_list(colls))
        except AdminError as exc:
            raise gr.Error(str(exc)) from exc
        return _once(f"Created **{name.strip()}**; password", secret)

    return create


def _account_actions(users: AdminUsers, auth: AuthService) -> tuple[Callable[..., str], ...]:
    """The disable, enable, set role, set collections and reset password handlers."""

    def manage(action: str, name: str, value: str, request: gr.Request) -> str:
        who = require_admin(request, auth)
        if not name:
            raise gr.Error("Choose a user first.")
        try:
            if action in ("disable", "enable"):
                users.set_disabled(who.username, name, action == "disable")
                return f"{name}: {action}d."
            if action == "role":
                users.set_role(who.username, name, value)
                return f"{name}: role is now {value}."
            if action == "collections":
                users.set_collections(who.username, name, csv_list(value))
                return f"{name}: collections set to {', '.join(csv_list(value))}."
            reset = users.reset_password(who.username, name)
            return (
                f"{_once(f'New password for **{name}**', reset.password)}. "
                f"Their {reset.sessions_ended} session(s) ended and their "
                f"{reset.api_keys_revoked} API key(s) were revoked; they can make new keys."
            )
        except AdminError as exc:
            raise gr.Error(str(exc)) from exc

    def disable(name: str, value: str, request: gr.Request) -> str:
        return manage("disable", name, value, request)

    def enable(name: str, value: str, request: gr.Request) -> str:
        return manage("enable", name, value, request)

    def set_role(name: str, value: str, request: gr.Request) -> str:
        return manage("role", name, value, request)

    def set_collections(name: str, value: str, request: gr.Request) -> str:
        return manage("collections", name, value, request)

    def reset(name: str, value: str, request: gr.Request) -> str:
        return manage("password", name, value, request)

    return disable, enable, set_role, set_collections, reset


def _key_actions(
    users: AdminUsers, auth: AuthService
) -> tuple[Callable[..., str], Callable[..., str]]:
    """The create key and revoke handlers."""

    def new_key(name: str, label: str, request: gr.Request) -> str:
        who = require_admin(request, auth)
        if not name:
            raise gr.Error("Choose a user first.")
        try:
            return _once(f"API key for **{name}**", users.create_key(who.username, name, label))
        except AdminError as exc:
            raise gr.Error(str(exc)) from exc

    def revoke(key_id: float | None, request: gr.Request) -> str:
        who = require_admin(request, auth)
        if key_id is None:
            raise gr.Error("Give a key id from the table.")
        try:
            users.revoke_key(who.username, int(key_id))
        except AdminError as exc:
            raise gr.Error(str(exc)) from exc
        return f"Key {int(key_id)} revoked."

    return new_key, revoke
