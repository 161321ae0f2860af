"""Near-duplicate chunks collapsed at retrieval (pure).

The same block of text in many documents (a shared notice, a paragraph every page of a
manual repeats, the same page under two names) would fill several of the prompt's few
slots with one text. Two chunks are near duplicates when their word sets overlap by at least
``NEAR`` (Jaccard, words case-folded, Hangul words included) and the shorter one is at least
``LENGTH`` of the longer; of such a group the best-ranked chunk is kept, in its place.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TypeVar

NEAR = 0.9
LENGTH = 0.75
_WORD = re.compile(r"\w+")
T = TypeVar("T")


def _words(text: str) -> frozenset[str]:
    return frozenset(w.casefold() for w in _WORD.findall(text))


def near_duplicates(a: str, b: str, near: float = NEAR) -> bool:
    wa, wb = _words(a), _words(b)
    if not wa or not wb:
        return a.strip() == b.strip()
    small, large = sorted((len(a), len(b)))
    if small < LENGTH * large:
        return False
    return len(wa & wb) / len(wa | wb) >= near


def collapse(items: Sequence[T], text_of: Callable[[T], str], near: float = NEAR) -> list[T]:
    """``items`` (best first) without those that nearly repeat a better-ranked one."""
    kept: list[T] = []
    texts: list[str] = []
    for item in items:
        text = text_of(item)
        if any(near_duplicates(text, t, near) for t in texts):
            continue
        kept.append(item)
        texts.append(text)
    return kept
