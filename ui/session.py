"""Who is behind a Gradio request (shared by the chat page and the admin console)."""

from __future__ import annotations

import gradio as gr

from appliance.core.auth.principal import Principal
from appliance.core.auth.service import AuthService


def principal_from(request: gr.Request, auth: AuthService) -> Principal | None:
    """The signed-in, enabled user of ``request``, or None."""
    return auth.principal_for(getattr(request, "username", None) or "")


def require_principal(request: gr.Request, auth: AuthService) -> Principal:
    """Like ``principal_from``, but raise a user-facing error when nobody is signed in."""
    principal = principal_from(request, auth)
    if principal is None:
        raise gr.Error("Your session has ended. Please log in again.")
    return principal


def require_admin(request: gr.Request, auth: AuthService) -> Principal:
    """Every admin handler calls this first: the role is checked on the server, per call."""
    principal = require_principal(request, auth)
    if not principal.is_admin:
        raise gr.Error("Only administrators can do this.")
    return principal
