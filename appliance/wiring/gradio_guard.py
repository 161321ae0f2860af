"""``GradioGuard``: what a mounted Gradio page's own routes (``<mount>/gradio_api/...``) may do,
for whom, checked before Gradio sees the request.

Gradio serves every page's uploads and files from one shared temporary folder, and checks only
that someone is signed in. Here, per mounted page (``GradioPage``):
- **Uploads** (``upload``, ``upload_progress``) only on a page that has an upload component
  (``uploads=True``: the admin console), for the role that may use it (``BodyGuard`` checks
  the admin's cookie before the body is read); elsewhere 404, unread. The chat page has none:
  before this, any staff cookie could store files there, never cleaned up.
- **Files** (``file=``, ``file/``) only on a page that hands out files (``files=True``), for
  its role: the console's files (an audit export, an uploaded document) are an admin's. A
  URL in place of a path is refused everywhere (Gradio would fetch it from the internet:
  nothing leaves the box), and so is ``proxy=``.
- **Calls** (``queue/join``, ``run/``, ``api/``, ``call/``) that name an event (``fn_index``)
  must name one of the page's events: Gradio answered an unknown index with a 500.
Anything else passes through untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

from gradio.data_classes import PredictBody
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from appliance.core.auth.principal import Principal
from appliance.wiring.role_check import cookie_token, refusal, role_refusal

API = "/gradio_api/"
CALLS = ("queue/join", "run/", "api/", "call/")
MAX_CALL_BODY = 8 * 1024 * 1024  # BodyGuard bounds it first; this only caps what is parsed


@dataclass(frozen=True)
class GradioPage:
    """A Gradio page mounted at ``prefix`` ("" for ``/``): the role its routes serve, whether
    it takes uploads and hands out files, and its events' indexes (read when asked: a page's
    events exist once it is built)."""

    prefix: str
    role: Literal["staff", "admin"]
    uploads: bool
    files: bool
    events: Callable[[], Collection[int]]


class GradioGuard:
    """ASGI middleware: see the module's rules. ``resolve`` finds the user of a session token
    (``AuthService.resolve``); ``cookie`` names the browser's session cookie."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        pages: tuple[GradioPage, ...],
        resolve: Callable[[str], Principal | None],
        cookie: str,
    ) -> None:
        self.app = app
        # longest prefix first: "/admin" before ""
        self.pages = sorted(pages, key=lambda p: len(p.prefix), reverse=True)
        self.resolve = resolve
        self.cookie = cookie

    def _route(self, path: str) -> tuple[GradioPage, str] | None:
        """The page whose Gradio API ``path`` is under, and the route within it."""
        for page in self.pages:
            head = page.prefix + API
            if path.startswith(head):
                return page, path[len(head) :]
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        routed = self._route(scope["path"]) if scope["type"] == "http" else None
        if routed is None:
            await self.app(scope, receive, send)
            return
        page, route = routed
        refused = await self._check(scope, page, route)
        if refused is not None:
            await refused(scope, receive, send)
            return
        if scope["method"] == "POST" and route.startswith(CALLS):
            await self._checked_call(scope, receive, send, page)
            return
        await self.app(scope, receive, send)

    async def _check(self, scope: Scope, page: GradioPage, route: str) -> JSONResponse | None:
        if route.startswith("upload"):  # upload, upload_progress
            return None if page.uploads else refusal(404, "this page takes no uploads")
        if route.startswith("proxy="):
            return refusal(403, "nothing is fetched from elsewhere")
        if route.startswith(("file=", "file/")):
            target = unquote(route[5:]).strip().lower()
            if "://" in target or target.startswith(("//", "http:", "https:")):
                return refusal(403, "nothing is fetched from elsewhere")
            if not page.files:
                return refusal(404, "this page hands out no files")
            return await self._check_role(scope, page)
        return None

    async def _check_role(self, scope: Scope, page: GradioPage) -> JSONResponse | None:
        token = cookie_token(Headers(scope=scope), self.cookie)
        return await role_refusal(token, self.resolve, admin=page.role == "admin")

    async def _checked_call(
        self, scope: Scope, receive: Receive, send: Send, page: GradioPage
    ) -> None:
        """Read the call's body; refuse an event index the page does not have, else hand the
        body on to Gradio as it came."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size <= MAX_CALL_BODY:
                chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if size <= MAX_CALL_BODY and not _known_event(body, page.events()):
            await refusal(422, "no such event on this page")(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _known_event(body: bytes, events: Collection[int]) -> bool:
    """False only when the body names an event index the page does not have, read as Gradio
    reads it (``"9999"`` and ``9999.0`` are 9999 to it); anything else is Gradio's to judge
    (it answers a malformed body with a 4xx itself)."""
    try:
        index = PredictBody.model_validate_json(body).fn_index
    except ValueError:  # pydantic's ValidationError, malformed JSON included
        return True
    return index is None or index in events
