"""The two errors every parser raises; their messages are shown to the user as they are."""

from __future__ import annotations


class ParseError(ValueError):
    """A file could not be turned into text; the message says why, for the user."""


class UnsupportedFormat(ParseError):
    """The file's type (by its suffix) is not one the appliance can read."""
