"""Names users give the appliance that it stores and shows: collection names and the names of
uploaded files.

A collection name is letters (any script, Hangul included), digits, spaces, ``-``, ``_`` and
``.`` (not first), 1 to 64 characters: no ``/`` (it would not fit a URL path segment) and no
markup. An uploaded file is stored under its base name only, without control or format
characters, NFC, at most 255 characters with its extension kept; the name as given is kept
apart for display. A file of an ingested folder is stored under its path below the folder
(``stored_path``), so that same-named files in two folders stay two documents.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from appliance.core.text import escaped_controls

COLLECTION_MAX = 64
FILENAME_MAX = 255
# the longest name as given that is kept for display (``Document.original_name``)
GIVEN_NAME_MAX = 1000
# an extension longer than this is not kept whole when a name is cut
_SUFFIX_MAX = 16
_FALLBACK_STEM = "document"


class InvalidName(ValueError):
    """A name that breaks the rules; the message says which."""


def _collection_char(char: str) -> bool:
    category = unicodedata.category(char)
    return category[0] in "LM" or category == "Nd" or char in " -_."


def collection_name(name: str) -> str:
    """``name`` as a collection is stored (NFC, without surrounding spaces); raises
    ``InvalidName`` unless it follows the rules."""
    name = unicodedata.normalize("NFC", name or "").strip()
    if not 1 <= len(name) <= COLLECTION_MAX:
        raise InvalidName(f"collection: give a name of 1 to {COLLECTION_MAX} characters")
    if not all(_collection_char(c) for c in name) or unicodedata.category(name[0])[0] == "M":
        raise InvalidName(
            f"collection {name!r}: use letters, digits, spaces, '-', '_' and '.' only"
        )
    if name.startswith("."):
        raise InvalidName(f"collection {name!r}: a name cannot start with '.'")
    return name


def existing_collection(name: str) -> str:
    """A collection name to look up (delete, rename from): ``name`` stripped, 1 to 64
    characters. Looser than ``collection_name``, so collections named before the rules
    (``../x``) can still be renamed and deleted."""
    name = (name or "").strip()
    if not 1 <= len(name) <= COLLECTION_MAX:
        raise InvalidName(f"collection: give a name of 1 to {COLLECTION_MAX} characters")
    return name


def stored_filename(name: str) -> str:
    """The name an uploaded file is stored under: the last path part of ``name`` (``/`` and
    ``\\`` both separate, a drive prefix goes), control and format characters removed, NFC,
    without leading or trailing dots and spaces, at most 255 characters with the extension
    kept; ``document`` (with the extension) when nothing is left."""
    name = unicodedata.normalize("NFC", name or "")
    name = "".join(c for c in name if unicodedata.category(c) not in ("Cc", "Cf", "Cs"))
    base = re.split(r"[/\\]", name)[-1]
    base = re.sub(r"^[A-Za-z]:", "", base).strip().rstrip(".")
    stem, dot, suffix = base.rpartition(".")
    if not dot or len(suffix) > _SUFFIX_MAX or not suffix.strip():
        stem, suffix = base, ""
    ext = f".{suffix.strip()}" if suffix else ""
    stem = stem.strip(" .") or _FALLBACK_STEM
    return stem[: FILENAME_MAX - len(ext)].rstrip(" .") + ext


def stored_path(parts: Sequence[str]) -> str:
    """The name a file of an ingested folder is stored under: its path below the folder, each
    part cleaned as ``stored_filename`` cleans a name, joined by ``/`` (no ``.``, ``..`` or
    empty parts), at most ``GIVEN_NAME_MAX`` characters. Two ``index.html`` in two folders
    are two documents; the same path ingested again is a new version of one."""
    kept = [p for p in parts if p.strip() not in ("", ".", "..")]
    path = "/".join(stored_filename(p) for p in kept) or stored_filename("")
    return path if len(path) <= GIVEN_NAME_MAX else path[-GIVEN_NAME_MAX:].lstrip("/")


def given_filename(name: str) -> str:
    """The name a file came with, as it is kept for display: control characters and lone
    surrogates written as ``\\xNN`` / ``\\udNNN`` escapes (a database may refuse NUL),
    at most 1000 characters."""
    return escaped_controls(name)[:GIVEN_NAME_MAX]
