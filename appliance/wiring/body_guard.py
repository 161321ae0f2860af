"""``BodyGuard``: a request body is bounded, and an upload is authenticated before it is read.

FastAPI reads (and Starlette spools to disk) a form's files before any dependency runs, so a
1 GB upload without a token used to be written to temporary storage in full before its 401.
Here, before the app sees the request:
- an upload route (``UploadRoute``) answers 401/403 at once unless the request carries an
  admin's credential (bearer session token, or the browser's session cookie);
- a body whose ``Content-Length`` is over its route's limit is refused with 413 unread;
- a body without a length is counted as it streams, and cut off past the limit: the app is
  told the client went away, and whatever it would have answered becomes the 413.
Upload routes have the batch limit (``rag.max_upload_batch_mb``); every other request
``security.max_body_kb``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from appliance.api.bearer import bearer_token
from appliance.core.auth.principal import Principal
from appliance.wiring.role_check import cookie_token, refusal, role_refusal

Credential = Literal["bearer", "cookie"]


@dataclass(frozen=True)
class UploadRoute:
    """A route that takes big bodies: ``method path``, and where its admin credential is."""

    method: str
    path: str
    credential: Credential


class _TooLarge(Exception):
    pass


class BodyGuard:
    """ASGI middleware: see the module's rules. ``resolve`` finds the user of a session token
    (``AuthService.resolve``); ``cookie`` names the browser's session cookie."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        resolve: Callable[[str], Principal | None],
        cookie: str,
        uploads: tuple[UploadRoute, ...],
        upload_limit: int,
        body_limit: int,
    ) -> None:
        self.app = app
        self.resolve = resolve
        self.cookie = cookie
        self.uploads = {(u.method, u.path): u for u in uploads}
        self.upload_limit = upload_limit
        self.body_limit = body_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        upload = self.uploads.get((scope["method"], scope["path"]))
        if upload is not None:
            refused = await self._check_admin(upload, headers)
            if refused is not None:
                await refused(scope, receive, send)
                return
        limit = self.upload_limit if upload else self.body_limit
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await self._too_large(limit)(scope, receive, send)
            return
        await self._counted(scope, receive, send, limit)

    async def _check_admin(self, route: UploadRoute, headers: Headers) -> JSONResponse | None:
        if route.credential == "bearer":
            token = bearer_token(headers.get("authorization"))
        else:
            token = cookie_token(headers, self.cookie)
        return await role_refusal(token, self.resolve, admin=True)

    @staticmethod
    def _too_large(limit: int) -> JSONResponse:
        shown = f"{limit / 1024 / 1024:.0f} MB" if limit >= 1024 * 1024 else f"{limit // 1024} KB"
        return refusal(413, f"request body too large: the limit here is {shown}")

    async def _counted(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        """Run the app, cutting the body off past ``limit`` and answering 413 then."""
        seen = 0
        over = False
        started = False

        async def counting_receive() -> Message:
            nonlocal seen, over
            if over:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    over = True
                    return {"type": "http.disconnect"}
            return message

        async def replacing_send(message: Message) -> None:
            nonlocal started
            if over:
                if message["type"] == "http.response.start" and not started:
                    started = True
                    await self._too_large(limit)(scope, receive, send)
                return  # the app's own answer to a cut-off body is dropped
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, replacing_send)
        except Exception:
            if not over:
                raise
        if over and not started:
            await self._too_large(limit)(scope, receive, send)
