"""The chat page's event handlers: each checks who is asking, calls a service, and returns
what the components show. No business logic here; per-user state lives in ``gr.State``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

import gradio as gr

from appliance.core.auth.principal import Principal
from appliance.core.auth.service import AuthService
from appliance.core.errors import ChatError
from appliance.core.services.chat import DeltaEvent, DoneEvent, ErrorEvent, RetrievalEvent
from appliance.core.services.conversations import ConversationService
from appliance.core.services.grounding import AnswerMode
from appliance.core.services.turn_line import TurnLine, TurnRefused
from ui.chat.layout import ChatComponents
from ui.chat.view import (
    conversation_choices,
    conversation_view,
    error_note,
    refused_note,
    waiting_note,
)
from ui.format import citations_html
from ui.grounded import answer_bubble
from ui.i18n import pick, t
from ui.login.routes import LANG_COOKIE
from ui.session import require_principal

# the outputs of a streamed turn, in this order
TURN_OUTPUTS = (
    *("chatbot", "ids", "sources", "panel", "chart", "cut_box", "write_box"),  # view_outputs()
    *("question", "conv", "conversations"),
)
# a waiting turn looks at its place this often; it also yields then, so that Stop (which can
# only close the handler between two yields) never waits longer for it
WAIT_STEP_S = 1.0


class ChatHandlers:
    def __init__(
        self,
        conversations: ConversationService,
        auth: AuthService,
        c: ChatComponents,
        line: TurnLine,
    ) -> None:
        self.convs = conversations
        self.auth = auth
        self.c = c
        self.line = line  # the page's turns, first come first served, as many as the engine runs

    def who(self, request: gr.Request) -> Principal:
        return require_principal(request, self.auth)

    # ---- views ----------------------------------------------------------------------------

    def _view(self, principal: Principal, conv_id: int | None, lang: str) -> list[Any]:
        turns = self.convs.turns(principal, conv_id) if conv_id is not None else []
        return conversation_view(turns, lang).outputs()

    def _choices(self, principal: Principal, lang: str, selected: int | None) -> dict:
        choices = conversation_choices(self.convs.list(principal), lang)
        return gr.update(choices=choices, value=selected)

    def _labels(self, lang: str) -> list[dict]:
        return [update(lang) for _component, update in self.c.labelled()]

    # ---- page load and language -----------------------------------------------------------

    def load(self, pref: str, request: gr.Request) -> list[Any]:
        """Open the page in the chosen (or the browser's) language, on the latest
        conversation: history comes from the database, so a reload shows it again."""
        principal = self.who(request)
        lang = pick(
            pref or request.cookies.get(LANG_COOKIE), request.headers.get("accept-language")
        )
        convs = self.convs.list(principal)
        conv_id = convs[0].id if convs else None
        return [
            lang,
            gr.update(value=lang),
            *self._labels(lang),
            gr.update(choices=conversation_choices(convs, lang), value=conv_id),
            conv_id,
            *self._view(principal, conv_id, lang),
        ]

    def switch_language(self, lang: str, conv_id: int | None, request: gr.Request) -> list[Any]:
        principal = self.who(request)
        return [
            lang,
            lang,
            *self._labels(lang),
            self._choices(principal, lang, conv_id),
            *self._view(principal, conv_id, lang),
        ]

    # ---- conversations --------------------------------------------------------------------

    def select(self, conv_id: int | None, lang: str, request: gr.Request) -> list[Any]:
        principal = self.who(request)
        title = next((c.title for c in self.convs.list(principal) if c.id == conv_id), "")
        try:
            view = self._view(principal, conv_id, lang)
        except ChatError as exc:
            raise gr.Error(str(exc)) from exc
        return [conv_id, title, *view]

    def new_chat(self, lang: str) -> list[Any]:
        return [None, gr.update(value=None), "", *self._view_empty(lang)]

    def _view_empty(self, lang: str) -> list[Any]:
        return conversation_view([], lang).outputs()

    def rename(self, conv_id: int | None, title: str, lang: str, request: gr.Request) -> dict:
        principal = self.who(request)
        if conv_id is None:
            raise gr.Error(t(lang, "conv.none"))
        try:
            self.convs.rename(principal, conv_id, title)
        except ChatError as exc:
            raise gr.Error(str(exc)) from exc
        return self._choices(principal, lang, conv_id)

    def delete(self, conv_id: int | None, lang: str, request: gr.Request) -> list[Any]:
        principal = self.who(request)
        if conv_id is None:
            raise gr.Error(t(lang, "conv.none"))
        try:
            self.convs.delete(principal, conv_id)
        except ChatError as exc:
            raise gr.Error(str(exc)) from exc
        gr.Info(t(lang, "conv.deleted"))
        return [None, self._choices(principal, lang, None), "", *self._view_empty(lang)]

    # ---- turns ----------------------------------------------------------------------------

    def _stream(
        self,
        principal: Principal,
        start: Any,
        shown: list[dict],
        shown_ids: list,
        question: str,
        conv_id: int | None,
        lang: str,
        answer: str = "",
    ) -> Iterator[list[Any]]:
        """Stream one turn into the chat, after ``answer`` (the answer so far, when continuing
        one). The question stays in its box until the answer is stored (a continuation leaves
        the box as it is); a failure shows a clear note in the chat and loses nothing. The
        note and Continue for a cut answer hide while an answer streams.

        The turn first waits for a slot in the page's line, saying where it is; it holds the
        slot until it ends, however it ends (Stop and a closed page close this generator). A
        turn the line refuses (its user already has their share in it, or every waiting place
        is taken) ends at once on a note that says so, its question still in the box."""
        skip, hidden = gr.skip(), gr.update(visible=False)
        keep = question if answer else ""  # the box once the answer is stored

        def row(bubble: str, sources: Any = skip) -> list[Any]:
            # ``shown_ids`` covers ``shown`` and the answer bubble after it
            chat = [*shown, {"role": "assistant", "content": bubble}]
            return [chat, shown_ids, sources, skip, skip, hidden, hidden, question, conv_id, skip]

        try:
            ticket = self.line.join(principal.user_id)
        except TurnRefused as exc:
            yield row(refused_note(exc.reason, exc.limit, lang))
            return
        try:
            place: int | None = None  # the place the chat shows
            while not ticket.wait(0 if place is None else WAIT_STEP_S):
                ahead = ticket.ahead()
                unchanged = [skip] * len(TURN_OUTPUTS)
                yield row(waiting_note(ahead, lang)) if ahead != place else unchanged
                place = ahead
            yield from self._turn(start, row, principal, answer, keep, lang)
        finally:
            ticket.leave()

    def _turn(
        self,
        start: Callable[[], Iterator[Any]],
        row: Callable[..., list[Any]],
        principal: Principal,
        answer: str,
        keep: str,
        lang: str,
    ) -> Iterator[list[Any]]:
        """The admitted turn: start it, stream its events into ``row``s, end on the stored
        conversation's view."""
        skip = gr.skip()
        try:
            events = start()
        except ChatError as exc:
            yield row(error_note(exc.kind, str(exc), lang))
            return
        sources, numbers, card, mode = skip, [], [], None
        for event in events:
            if isinstance(event, RetrievalEvent):
                # the card is shown at once: it never waits for the first generated token
                numbers, mode = [x.number for x in event.citations], event.mode
                card = [asdict(x) for x in event.evidence]
                sources = citations_html([asdict(x) for x in event.citations], lang, card)
                bubble = answer_bubble(answer, numbers, lang, card, mode=mode)
                yield row(bubble or t(lang, "chat.thinking"), sources)
            elif isinstance(event, DeltaEvent):
                answer += event.text
                yield row(answer_bubble(answer, numbers, lang, card, mode=mode), sources)
            elif isinstance(event, ErrorEvent):
                yield row(error_note(event.kind, event.message, lang), sources)
                return
            elif isinstance(event, DoneEvent):
                new_id = event.conversation_id
                view = self._view(principal, new_id, lang)
                yield [*view, keep, new_id, self._choices(principal, lang, new_id)]

    def respond(
        self,
        question: str,
        conv_id: int | None,
        history: list,
        ids: list,
        lang: str,
        request: gr.Request,
    ) -> Iterator[list[Any]]:
        principal = self.who(request)
        shown = [*(history or []), {"role": "user", "content": question}]
        yield from self._stream(
            principal,
            lambda: self.convs.ask(principal, question, conv_id),
            shown,
            [*(ids or []), None, None],
            question,
            conv_id,
            lang,
        )

    def regenerate(
        self, conv_id: int | None, question: str, lang: str, request: gr.Request
    ) -> Iterator[list[Any]]:
        """Answer the last question again; the old answer stays stored until the new one is."""
        yield from self._again(conv_id, question, lang, request, None)

    def write_answer(
        self, conv_id: int | None, question: str, lang: str, request: gr.Request
    ) -> Iterator[list[Any]]:
        """The "Write an answer" button after an extractive answer: the last question again,
        grounded (the card, then the model's checked text); the extractive answer stays stored
        until this one is."""
        yield from self._again(conv_id, question, lang, request, "grounded")

    def _again(
        self,
        conv_id: int | None,
        question: str,
        lang: str,
        request: gr.Request,
        mode: AnswerMode | None,
    ) -> Iterator[list[Any]]:
        principal = self.who(request)
        if conv_id is None:
            raise gr.Error(t(lang, "conv.none"))
        shown = conversation_view(self.convs.turns(principal, conv_id), lang)
        history, ids = shown.history, shown.message_ids
        if not history:
            raise gr.Error(t(lang, "conv.none"))
        yield from self._stream(
            principal,
            lambda: self.convs.regenerate(principal, conv_id, mode),
            history[:-1],
            [*ids[:-1], None],
            question,
            conv_id,
            lang,
        )

    def continue_answer(
        self, conv_id: int | None, question: str, lang: str, request: gr.Request
    ) -> Iterator[list[Any]]:
        """Go on with the last answer where the length limit cut it, in its own bubble; the
        stored answer grows once the continuation has finished."""
        principal = self.who(request)
        if conv_id is None:
            raise gr.Error(t(lang, "conv.none"))
        turns = self.convs.turns(principal, conv_id)
        if not turns:
            raise gr.Error(t(lang, "conv.none"))
        shown = conversation_view(turns, lang)
        yield from self._stream(
            principal,
            lambda: self.convs.continue_answer(principal, conv_id),
            shown.history[:-1],
            shown.message_ids,
            question,
            conv_id,
            lang,
            answer=turns[-1].answer,
        )

    def stopped(self, history: list, lang: str) -> list:
        """After Stop: the partial answer is not stored; say so, and keep the question."""
        note = {"role": "assistant", "content": f"_{t(lang, 'chat.stopped')}_"}
        return [*(history or []), note]

    # ---- feedback -------------------------------------------------------------------------

    def like(self, ids: list, lang: str, data: gr.LikeData, request: gr.Request) -> list[Any]:
        principal = self.who(request)
        index = data.index if isinstance(data.index, int) else data.index[0]
        message_id = ids[index] if 0 <= index < len(ids or []) else None
        rating = {True: 1, "Like": 1, False: -1, "Dislike": -1}.get(data.liked)
        if message_id is None or rating is None:
            return [gr.skip(), gr.skip()]
        try:
            self.convs.feedback(principal, message_id, rating)
        except ChatError as exc:
            raise gr.Error(str(exc)) from exc
        return [(message_id, rating), t(lang, "feedback.thanks")]

    def send_feedback(
        self, rated: tuple | None, comment: str, lang: str, request: gr.Request
    ) -> list[Any]:
        principal = self.who(request)
        if not rated:
            return [gr.skip(), t(lang, "feedback.first")]
        message_id, rating = rated
        try:
            self.convs.feedback(principal, message_id, rating, comment)
        except ChatError as exc:
            raise gr.Error(str(exc)) from exc
        return ["", t(lang, "feedback.thanks")]
