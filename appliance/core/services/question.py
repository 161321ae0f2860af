"""Whether a question can be asked at all (pure): the refusals a turn gets before any work."""

from __future__ import annotations

from appliance.core.errors import ChatError
from appliance.core.text import is_blank, is_valid_unicode


def question_refusal(question: str, max_chars: int) -> ChatError | None:
    """The refusal of ``question`` (controls already dropped, stripped), or None: not valid
    Unicode (``invalid``), nothing to show (``empty``: spaces, NUL, zero-width or other format
    characters only) or longer than ``max_chars`` (``too_long``)."""
    if not is_valid_unicode(question):
        return ChatError("invalid", "the question is not valid Unicode text")
    if is_blank(question):
        return ChatError("empty", "the question is empty")
    if len(question) > max_chars:
        return ChatError(
            "too_long", f"the question is {len(question)} characters; the limit is {max_chars}"
        )
    return None
