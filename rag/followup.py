"""What a follow-up question is retrieved with (pure).

A follow-up that leans on the conversation ("And sick leave?", "What hours is it staffed?",
"그럼 재발급 비용은요?") names too little to retrieve on its own: it is retrieved with the
previous question's words added (and that question's own carried words, two questions back at
most, so a chain of short follow-ups keeps its topic). A follow-up that names its own subject
("How do I reset my VPN password?" after a question about leave) is retrieved alone, as a
first question is, so a topic change finds the new topic's documents.

A question leans on the conversation when it has a marker of reference or continuation (a
pronoun, a demonstrative, "and ...", "what about", "그럼", "그것") or at most ``SHORT_TERMS``
content terms (``tokenize``: the BM25 tokens, Kiwi morphemes for Korean, stopwords dropped).
The question's own words come first and twice, so they outweigh the carried ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

SHORT_TERMS = 2  # a question with at most this many content terms leans on the previous one
MAX_CARRIED = 2  # earlier questions whose words a follow-up may carry
# English words that refer back; "it" only where it is not a dummy subject ("is it possible")
_EN_REFERENCE = frozenset(
    ("they", "them", "their", "theirs", "those", "these", "that", "this", "its")
    + ("he", "she", "him", "her", "his", "same", "ones")
)
_EN_IT = re.compile(r"\bit\b(?!\s+(?:possible|ok|okay|true|allowed|necessary|required)\b)")
_EN_LEADS = re.compile(r"^\s*(?:and|also|then|so|or|but|what about|how about|same)\b")
_KO_OPENERS = (
    "그럼 그러면 그리고 그래서 또 그건 그게 그거 그것 그중 "
    "이건 이거 이것 저것 거기 그곳 그때 그분 그쪽"
)
_KO_REFERENCE = re.compile(
    r"^\s*(?:" + "|".join(_KO_OPENERS.split()) + r")|그것|그거|그건|그게|이것|이거|거기|그곳|그중"
)
_WORD = re.compile(r"[A-Za-z']+")


@dataclass(frozen=True)
class RetrievalQuery:
    """The text a question is retrieved with, and why: ``first``, ``self-contained``,
    ``reference`` (it points back) or ``short`` (it names too little)."""

    text: str
    reason: str

    @property
    def carried(self) -> bool:
        return self.reason in ("reference", "short")


def leans_on_previous(question: str, tokenize: Callable[[str], list[str]]) -> str:
    """``reference``, ``short`` or "" (the question stands alone)."""
    lower = question.lower()
    words = set(_WORD.findall(lower))
    if words & _EN_REFERENCE or _EN_IT.search(lower) or _EN_LEADS.search(lower):
        return "reference"
    if _KO_REFERENCE.search(question):
        return "reference"
    if len(set(tokenize(question))) <= SHORT_TERMS:
        return "short"
    return ""


def retrieval_query(
    question: str, earlier: Sequence[str], tokenize: Callable[[str], list[str]]
) -> RetrievalQuery:
    """What ``question`` is retrieved with after the ``earlier`` questions of its
    conversation (oldest first)."""
    if not earlier:
        return RetrievalQuery(question, "first")
    reason = leans_on_previous(question, tokenize)
    if not reason:
        return RetrievalQuery(question, "self-contained")
    carried: list[str] = []
    # walk back while each earlier question leaned on the one before it
    for n, previous in enumerate(reversed(earlier)):
        carried.append(previous)
        if n + 1 >= MAX_CARRIED or not leans_on_previous(previous, tokenize):
            break
    return RetrievalQuery(" ".join([question, question, *carried]), reason)
