"""Blocks repeated across a collection's documents, dropped at ingest (pure).

Site chrome that no markup names (a banner line, "Report a Bug / Show Source", a copyright
footer) is the same line on most pages of one collection; what a reader reads is not. A block
is one line of a parsed section, compared with its white space collapsed and case folded. A
block is *repeated* when the documents holding it are at least ``min_docs`` and at least
``min_share`` of the collection's documents. Measured on the real sets after the HTML parser
drops marked-up navigation (``appliance bench chunks``): content labels reach half of a
collection ("See also" 50% and "Note" 49% of the Python pages, "| 참고" 44% of GIMP's,
"이 명령을 사용하려면..." 42% of LibreOffice's); site chrome that markup does not name sits
on nearly every page (before the chrome rules: LibreOffice's "LibreOffice 7.4 Help / Module /
Contents" 98%, Python's "Report a Bug / Show Source" 92%). Four fifths of the collection, and
at least five documents (a two-page collection shares nothing by chance), separates the two;
page-wide constant labels above it go too ("관련 주제" 93%, the Debian FAQ's "차례" 100%).

The rule over time (``repeated_blocks`` is a function of the collection's block counts only):
the counts cover every document of the collection as parsed (before dropping), the one being
ingested included, and a batch (a folder) is counted whole before any of its files is chunked,
so a folder gives the same chunks in any file order. A later upload is judged by the counts
with it included; blocks it makes repeated are swept out of the documents already stored (by
the ingest service). A block that stops being repeated (documents deleted or added) is not
restored to documents already stored; it comes back when such a document is ingested again.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rag.types import Section

# the rule's defaults (see the module docstring for the measurement)
MIN_DOCS = 5
MIN_SHARE = 0.8


@dataclass(frozen=True)
class RepeatRule:
    min_docs: int = MIN_DOCS
    min_share: float = MIN_SHARE

    def __post_init__(self) -> None:
        if self.min_docs < 2 or not 0.0 < self.min_share <= 1.0:
            raise ValueError("a repeated block needs min_docs >= 2 and 0 < min_share <= 1")


def block_key(line: str) -> str:
    """The key of one line: a short hash of its collapsed, case-folded text ('' if blank)."""
    norm = " ".join(line.split()).casefold()
    if not norm:
        return ""
    return hashlib.blake2b(norm.encode("utf-8"), digest_size=8).hexdigest()


def document_blocks(sections: Iterable[Section]) -> frozenset[str]:
    """The keys of every line of a document's sections (headings are labels, not blocks)."""
    return frozenset(k for s in sections for line in s.text.splitlines() if (k := block_key(line)))


def repeated_blocks(
    docs: Mapping[str, frozenset[str]], rule: RepeatRule = RepeatRule()
) -> frozenset[str]:
    """The repeated blocks of a collection given each document's block keys."""
    counts: Counter[str] = Counter()
    for keys in docs.values():
        counts.update(keys)
    floor = max(rule.min_docs, rule.min_share * len(docs))
    return frozenset(k for k, n in counts.items() if n >= floor)


def strip_lines(text: str, repeated: frozenset[str]) -> str:
    """``text`` without its lines whose key is in ``repeated``."""
    if not repeated:
        return text
    return "\n".join(ln for ln in text.split("\n") if block_key(ln) not in repeated).strip()


def strip_blocks(sections: Iterable[Section], repeated: frozenset[str]) -> tuple[Section, ...]:
    """The sections without their repeated lines; a section left empty is dropped."""
    out = []
    for s in sections:
        text = strip_lines(s.text, repeated)
        if text:
            out.append(Section(s.heading, text, s.page, s.ocr_confidence))
    return tuple(out)
