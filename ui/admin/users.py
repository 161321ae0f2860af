"""Users tab: accounts, roles, collection access, password resets and API keys."""

from __future__ import annotations

import gradio as gr

from appliance.core.auth.principal import ROLES
from appliance.core.auth.service import AuthService
from appliance.core.services.admin import AdminConsole, AdminError
from ui.admin.common import Loader, csv_list, table
from ui.session import require_admin

USER_COLUMNS = ("username", "role", "status", "collections", "api_keys", "created")
KEY_COLUMNS = ("id", "username", "name", "prefix", "created", "last_used", "status")


def _once(what: str, secret: str) -> str:
    return f"{what}: `{secret}` (shown once: copy it now)"


def build_users_tab(console: AdminConsole, auth: AuthService) -> Loader:
    users = console.users

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

    def create(name: str, password: str, role: str, colls: str, request: gr.Request) -> str:
        who = require_admin(request, auth)
        try:
            secret = users.create(who.username, name, password, role, csv_list(colls))
        except AdminError as exc:
            raise gr.Error(str(exc)) from exc
        return _once(f"Created **{name.strip()}**; password", secret)

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
            return _once(f"New password for **{name}**", users.reset_password(who.username, name))
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

    with gr.Tab("Users", id="users"):
        accounts = gr.Dataframe(table([], USER_COLUMNS), label="Accounts", elem_id="users")
        with gr.Accordion("New account", open=False), gr.Row():
            new_name = gr.Textbox(label="Username", elem_id="new-username")
            new_password = gr.Textbox(label="Password (empty: generate)", type="password")
            new_role = gr.Radio(list(ROLES), value="staff", label="Role")
            new_colls = gr.Textbox(label="Collections", placeholder="default, hr")
            create_btn = gr.Button("Create", variant="primary", elem_id="create-user")
        with gr.Row():
            who = gr.Dropdown([], label="User", elem_id="manage-user")
            value = gr.Textbox(label="Role or collections", placeholder="admin | hr, it")
        with gr.Row():
            disable_btn = gr.Button("Disable", variant="stop")
            enable_btn = gr.Button("Enable")
            role_btn = gr.Button("Set role")
            colls_btn = gr.Button("Set collections")
            reset_btn = gr.Button("Reset password")
        note = gr.Markdown(elem_id="users-note")
        keys = gr.Dataframe(table([], KEY_COLUMNS), label="API keys", elem_id="api-keys")
        with gr.Row():
            key_user = gr.Dropdown([], label="Key for user")
            key_name = gr.Textbox(label="Key name")
            key_btn = gr.Button("Create key")
            key_id = gr.Number(label="Key id", precision=0)
            revoke_btn = gr.Button("Revoke", variant="stop")
        refresh = gr.Button("Refresh", size="sm")

    outputs = [accounts, keys, who, key_user]
    create_btn.click(create, [new_name, new_password, new_role, new_colls], note).success(
        load, None, outputs
    )
    for btn, fn in (
        (disable_btn, disable),
        (enable_btn, enable),
        (role_btn, set_role),
        (colls_btn, set_collections),
        (reset_btn, reset),
    ):
        btn.click(fn, [who, value], note).success(load, None, outputs)
    key_btn.click(new_key, [key_user, key_name], note).success(load, None, outputs)
    revoke_btn.click(revoke, key_id, note).success(load, None, outputs)
    refresh.click(load, None, outputs)
    return Loader(load, outputs)
