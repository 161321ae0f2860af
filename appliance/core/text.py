"""Checks on text from users: whether it shows anything, and whether it is valid Unicode.

``str.strip`` keeps NUL, zero-width and other format characters, so a question made of them
looks non-empty to it; ``is_blank`` is the emptiness test the services share. A lone surrogate
(``"\\ud800"``, which JSON can spell) is a Python ``str`` but no Unicode text: it cannot be
encoded, stored or tokenized, so it is refused where text comes in.
"""

from __future__ import annotations

import unicodedata

# categories that show nothing: controls, format characters (zero-width space, joiners, BOM,
# word joiner, bidi marks), surrogates, separators (spaces, line and paragraph separators)
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zs", "Zl", "Zp"})
# letters and symbols that render as blank: Hangul fillers, the braille blank, the combining
# grapheme joiner
_BLANK_CHARACTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800\u034f")


def is_invisible(char: str) -> bool:
    """Whether one character shows nothing (whitespace, a control or format character...)."""
    return (
        char.isspace()
        or char in _BLANK_CHARACTERS
        or unicodedata.category(char) in _INVISIBLE_CATEGORIES
    )


def is_blank(text: str) -> bool:
    """True when ``text`` has no visible character (empty, spaces, NUL, zero-width...)."""
    return all(is_invisible(c) for c in text)


def is_valid_unicode(text: str) -> bool:
    """False when ``text`` holds a lone surrogate (it cannot be encoded as UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def without_controls(text: str) -> str:
    """``text`` without C0/C1 control characters other than tab, newline and carriage return
    (PostgreSQL cannot store NUL in text; the others are never meant)."""
    return "".join(c for c in text if c in "\t\n\r" or unicodedata.category(c) != "Cc")


def escaped_controls(text: str) -> str:
    """``text`` with control characters and lone surrogates written as ``\\xNN`` /
    ``\\udNNN`` escapes: what a database may refuse (PostgreSQL: NUL), kept readable."""
    return "".join(
        c if unicodedata.category(c) not in ("Cc", "Cs") else ascii(c)[1:-1] for c in text
    )
