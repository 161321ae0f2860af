"""Split a chunk's text into evidence pieces: sentences, list items and table rows (pure).

The text is Markdown-ish (what the parsers and the chunker produce): ATX headings, paragraphs,
``-``/``*``/``+``/``1.``/``1)`` list items, ``|``-tables and plain text. Each piece is a span of
the text given, with exact character offsets:

- ``text[p.start:p.end]`` is the piece, stripped of surrounding whitespace, of its list bullet
  and of a table row's outer pipes (inner pipes between cells stay);
- pieces are in text order, never overlap and are never empty.

Decisions:

- Headings (``# Title``) are not pieces: they name a section, they state nothing, and the
  citation header shows them already. Table separator rows (``|---|:--:|``) and fenced code
  markers are not pieces either.
- A list item (with its indented continuation lines) is one piece of kind ``item``, however
  many sentences it holds: a step or a rule reads as one unit.
- A table row, header row included, is one piece of kind ``row``.
- A paragraph is split into sentences. A paragraph with Hangul goes through Kiwi's sentence
  splitter (loaded once, lazily, on the first Korean paragraph: about 1-2 s). Other text uses
  the rule-based splitter below, which does not split after abbreviations ("e.g.", "Mr.",
  "ext."), initials, or inside decimals, versions, URLs and e-mail addresses (a period that is
  not followed by whitespace never ends a sentence).
- A line break inside a paragraph ends a sentence unless the line ends with a joining mark
  (``,;:(-/&``) or the next line starts in lowercase (plain text puts one statement per line
  without a period: "Phone: 3350") and the line does not end a sentence itself (a lowercase
  label line after a definition: "The default is off." / "ssl_ca_file (string)").
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

PieceKind = Literal["sentence", "item", "row"]

HANGUL = re.compile(r"[\uac00-\ud7a3\u1100-\u11ff\u3130-\u318f]")
_HEADING = re.compile(r"#{1,6}(?:\s|$)")
_BULLET = re.compile(r"(?:[-*+\u2022\u25aa\u25cf]|\d{1,3}[.)]|[a-z][.)]|[A-Z]\))\s+")
_RULE_LINE = re.compile(r"(?:[-=*_]\s*){3,}")
_TABLE_SEPARATOR = re.compile(r"\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?")
_FENCE = re.compile(r"(?:```|~~~)")
_QUOTE = re.compile(r">\s?")
# a candidate sentence end: terminal punctuation, then closing quotes/brackets, then whitespace
_END = re.compile(r"[.!?\u2026\u3002\uff01\uff1f]+[\"'\u201d\u2019)\]]*(?=\s)")
_JOINING_LINE_END = frozenset(",;:(-/&\u2013\u2014")
# lowercase words that never end a sentence when followed by a period
_ABBREVIATIONS_TEXT = """mr mrs ms dr prof sr jr st vs etc e.g i.e cf al approx ca dept est
ext tel fax no nos fig figs vol vols p pp ed eds inc ltd co corp jan feb mar apr jun jul aug
sep sept oct nov dec mon tue tues wed thu thur thurs fri sat sun mt ft rev gen gov min max avg
incl excl resp ref refs sec art para dist div hr hrs"""
_ABBREVIATIONS = frozenset(_ABBREVIATIONS_TEXT.split())
# abbreviations that often end a sentence too: they block a split only before lowercase/digit
_SOFT_ABBREVIATIONS = frozenset({"etc", "inc", "ltd", "co", "corp", "al", "hr", "hrs", "min", "no"})


@dataclass(frozen=True)
class Piece:
    """One sentence, list item or table row: ``text[start:end]`` of the text it came from."""

    start: int
    end: int
    kind: PieceKind


def split_pieces(text: str) -> list[Piece]:
    """The sentences, list items and table rows of ``text``, in order (see the module doc)."""
    if not isinstance(text, str):
        raise TypeError(f"split_pieces expects str, got {type(text).__name__}")
    pieces: list[Piece] = []
    for kind, start, end in _blocks(text):
        if kind == "paragraph":
            pieces.extend(split_sentences(text, start, end))
        else:
            piece = _trimmed(text, start, end, kind)
            if piece is not None:
                pieces.append(piece)
    return pieces


def split_sentences(text: str, start: int = 0, end: int | None = None) -> list[Piece]:
    """The sentences of ``text[start:end]`` (one paragraph of prose), with offsets into ``text``."""
    end = len(text) if end is None else end
    if HANGUL.search(text, start, end):
        spans = _kiwi_spans(text, start, end)
    else:
        spans = _rule_spans(text, start, end)
    out = []
    for s, e in spans:
        piece = _trimmed(text, s, e, "sentence")
        if piece is not None:
            out.append(piece)
    return out


# -- blocks ---------------------------------------------------------------------------------


def _lines(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each line, without its line break."""
    pos = 0
    while True:
        newline = text.find("\n", pos)
        if newline < 0:
            yield pos, len(text)
            return
        yield pos, newline
        pos = newline + 1


def _blocks(text: str) -> Iterator[tuple[str, int, int]]:
    """("paragraph" | "item" | "row", start, end) spans; headings and separators are dropped."""
    current: list[Any] | None = None  # [kind, start, end] of the block being built
    in_fence = False
    for line_start, line_end in _lines(text):
        line = text[line_start:line_end]
        stripped = line.strip()
        indent = line_start + len(line) - len(line.lstrip())
        if _FENCE.match(stripped):
            in_fence = not in_fence
            if current:
                yield tuple(current)  # type: ignore[misc]
            current = None
            continue
        kind, body_start = _line_kind(text, indent, line_end, stripped, in_fence)
        if kind in ("blank", "skip"):
            if current:
                yield tuple(current)  # type: ignore[misc]
            current = None
            continue
        continues = current is not None and kind == "text" and not in_fence
        # a paragraph takes any text line; an item only an indented continuation line
        if continues and (
            current[0] == "paragraph" or (current[0] == "item" and indent > line_start)
        ):
            current[2] = line_end
            continue
        if current:
            yield tuple(current)  # type: ignore[misc]
        block_kind = "paragraph" if kind in ("text", "quote") else kind
        current = [block_kind, body_start, line_end]
    if current:
        yield tuple(current)  # type: ignore[misc]


def _line_kind(text: str, indent: int, end: int, stripped: str, in_fence: bool) -> tuple[str, int]:
    """What one line is, and where its body starts (after a bullet, a pipe or a quote mark)."""
    if not stripped:
        return "blank", indent
    if in_fence:
        return "code", indent  # a code line stands alone: never merged into prose
    if _HEADING.match(stripped) or _RULE_LINE.fullmatch(stripped):
        return "skip", indent
    if stripped.startswith("|") or stripped.count("|") >= 2:
        if _TABLE_SEPARATOR.fullmatch(stripped):
            return "skip", indent
        return "row", indent
    bullet = _BULLET.match(text, indent, end)
    if bullet:
        return "item", bullet.end()
    quote = _QUOTE.match(text, indent, end)
    if quote:
        return "quote", quote.end()
    return "text", indent


def _trimmed(text: str, start: int, end: int, kind: str) -> Piece | None:
    """The span without surrounding whitespace (and a row's outer pipes); None when empty."""
    strip = " \t\r\n\u00a0|" if kind == "row" else " \t\r\n\u00a0"
    while start < end and text[start] in strip:
        start += 1
    while end > start and text[end - 1] in strip:
        end -= 1
    if start >= end:
        return None
    if kind == "row" and not re.search(r"[^\s|:\-]", text[start:end]):
        return None  # a row of empty cells
    piece_kind: PieceKind = "row" if kind == "row" else "item" if kind == "item" else "sentence"
    return Piece(start, end, piece_kind)


# -- English (rule-based) -------------------------------------------------------------------


def _rule_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Sentence spans of ``text[start:end]`` by punctuation and line-break rules."""
    spans = []
    sentence_start = start
    for cut in _cuts(text, start, end):
        spans.append((sentence_start, cut))
        sentence_start = cut
    spans.append((sentence_start, end))
    return spans


def _cuts(text: str, start: int, end: int) -> Iterator[int]:
    """Offsets where one sentence ends and the next begins, in order."""
    candidates: list[tuple[int, str]] = []
    for m in _END.finditer(text, start, end):
        candidates.append((m.end(), "punct"))
    for m in re.finditer(r"\n", text[start:end]):
        candidates.append((start + m.start(), "newline"))
    candidates.sort()
    last = start
    for pos, why in candidates:
        if pos <= last or pos >= end:
            continue
        nxt = _next_char(text, pos, end)
        if nxt is None:
            continue
        ok = (
            _ends_at_newline(text, last, pos, nxt) if why == "newline" else _ends_at(text, pos, nxt)
        )
        if ok:
            last = pos
            yield pos


def _next_char(text: str, pos: int, end: int) -> str | None:
    m = re.compile(r"\s*(\S)").match(text, pos, end)
    return m.group(1) if m else None


def _ends_at_newline(text: str, last: int, pos: int, nxt: str) -> bool:
    """Whether the line break at ``pos`` ends the sentence begun at ``last`` (module doc)."""
    before = text[last:pos].rstrip()
    if not before or before[-1] in _JOINING_LINE_END:
        return False
    if not nxt.islower():
        return True
    end = last + len(before)
    closed = before.rstrip("\"'\u201d\u2019)]")
    return bool(closed) and closed[-1] in ".!?" and _ends_at(text, end, nxt.upper())


def _ends_at(text: str, pos: int, nxt: str) -> bool:
    """Whether the punctuation ending at ``pos`` ends a sentence, given the next visible char."""
    if nxt.islower() or nxt in ",;:":
        return False
    head = text[:pos].rstrip("\"'\u201d\u2019)]")
    if not head.endswith("."):
        return True  # ! ? and the like
    word = re.search(r"(\S+)\.$", head)
    if word is None:
        return True
    token = word.group(1).lstrip("(\"'\u201c\u2018[").lower()
    if re.fullmatch(r"(?:[a-z]\.)+[a-z]", token):  # e.g / i.e / u.s dotted abbreviations
        return token not in ("e.g", "i.e") and nxt.isupper() and len(token) > 3
    if len(token) == 1 and token.isalpha() and word.group(1)[-1].isupper():
        return False  # an initial: "J. Smith"
    if token.isdigit() and len(token) <= 2 and _opens_list(text, word.start(1)):
        return False  # an inline list number: "Steps: 1. Open the portal"
    if token in _ABBREVIATIONS:
        return token in _SOFT_ABBREVIATIONS and not nxt.isdigit()
    return True


def _opens_list(text: str, pos: int) -> bool:
    """Whether ``pos`` starts a line or follows a colon or a sentence (an inline list item)."""
    before = text[:pos].rstrip(" \t")
    return not before or before[-1] in ":;\n.!?"


# -- Korean (Kiwi) --------------------------------------------------------------------------

_kiwi: Any = None
_kiwi_lock = threading.Lock()


def shared_kiwi() -> Any:  # noqa: ANN401 - kiwipiepy has no type stubs
    """The process's one Kiwi instance of this module, built on first use (about 1-2 s).

    One instance holds about 400 MiB, so ``rag.verify`` analyses with this one too. It runs in
    the calling thread (``num_workers=-1``): no worker pool on a 2-core box.
    """
    global _kiwi
    with _kiwi_lock:
        if _kiwi is None:
            from kiwipiepy import Kiwi

            _kiwi = Kiwi(num_workers=-1)  # -1: analyse in the calling thread
        return _kiwi


def _kiwi_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Kiwi's sentence spans of ``text[start:end]``; offsets are Kiwi's, shifted to ``text``."""
    segment = text[start:end]
    sentences = shared_kiwi().split_into_sents(segment)
    spans = [(start + s.start, start + s.end) for s in sentences]
    # Kiwi's spans cover the sentences; a sentence with an inner line break is also cut there
    out: list[tuple[int, int]] = []
    for s, e in spans:
        out.extend(_rule_newline_spans(text, s, e))
    return out


def _rule_newline_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    spans = []
    last = start
    for m in re.finditer(r"\n", text[start:end]):
        pos = start + m.start()
        nxt = _next_char(text, pos, end)
        if nxt is not None and _ends_at_newline(text, last, pos, nxt):
            spans.append((last, pos))
            last = pos
    spans.append((last, end))
    return spans
