"""The kinds of error a chat request can end in, and the exception that carries one.

``ErrorKind`` is the one list: the services raise ``ChatError`` with one, turn events and the
metrics report them, and each edge maps them to what it shows (HTTP statuses: the table in
``appliance.api.errors``; the chat page: ``ui.chat.view.error_note``).
"""

from __future__ import annotations

from typing import Literal, cast, get_args

from engine.base import EngineError

# refused by the services before any work: the request itself is wrong
RequestErrorKind = Literal["empty", "too_long", "invalid", "not_found"]
# an engine's refusal or failure (``EngineError.kind`` of each class in ``engine``)
EngineErrorKind = Literal[
    "busy", "unavailable", "prompt_too_long", "invalid_request", "engine_error", "grammar_violation"
]
# a bug of ours, reported rather than cutting the response
InternalErrorKind = Literal["internal"]

ErrorKind = Literal[RequestErrorKind, EngineErrorKind, InternalErrorKind]

ALL_ERROR_KINDS: tuple[ErrorKind, ...] = get_args(ErrorKind)


class ChatError(Exception):
    """A request that cannot be done or a turn that cannot start; ``kind`` is stable for the
    APIs and the UI, the message says why in words."""

    def __init__(self, kind: ErrorKind, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.retry_after_s = retry_after_s

    @classmethod
    def from_engine(cls, exc: EngineError) -> ChatError:
        """The engine's refusal as a ``ChatError`` of the same kind (with its retry hint)."""
        return cls(engine_kind(exc), str(exc), getattr(exc, "retry_after_s", None))


def engine_kind(exc: EngineError) -> ErrorKind:
    """``exc.kind`` as an ``ErrorKind`` (the engine package cannot import this module, so its
    classes name their kinds as plain strings; ``EngineErrorKind`` lists them)."""
    return cast(ErrorKind, exc.kind)
