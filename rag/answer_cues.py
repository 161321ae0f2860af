"""What a question asks for, and what a piece of a chunk offers it (pure).

Two cues of classic answer extraction, read from the words alone, in English and Korean:

- **Expected answer type.** "How much", "how fast", "how many", "what is the extension",
  "얼마", "몇", "비용", "언제" ask for a value: a number, an amount, a duration, a phone
  extension, a date, a URL or an e-mail address. A piece that states such a value (``rag.facts``)
  answers it better than one that only restates the question ("For home office equipment, see
  the equipment stipend" against "... a one-time equipment stipend of 500,000 KRW").
- **Procedure.** "How do I", "what should I do", "어떻게", "방법" ask for the steps, and the
  first step of a numbered list is where the reader starts.

``rag.evidence`` turns both into small score bonuses; the measurements are in its docstring.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from rag.answer_type import question_types
from rag.facts import find_facts

_HANGUL = re.compile(r"[\uac00-\ud7a3]")
_VALUE_EN = re.compile(
    r"\b(?:how (?:much|many|long|fast|soon|often|quickly|late|early|far)|when"
    r"|what (?:time|hours|days)"
    # "what is the <...> limit": a value noun in a what-question, not anywhere ("who owns
    # the items bought with the stipend?" asks for no value)
    r"|(?:what|which)(?:'s| is| are)?\b[^?]{0,40}?\b(?:cost|price|fee|amount|rate|limit"
    r"|deadline|allowance|stipend|per-diem|extension|number|url|website|link|address|e-?mail))\b",
    re.IGNORECASE,
)
_VALUE_KO = re.compile(r"얼마|몇|비용|금액|가격|요금|한도|기한|언제|내선|전화번호|며칠|일비|주소")
_PROCEDURE_EN = re.compile(
    r"\b(?:how (?:do|can|should|would) (?:i|we|you)|what (?:should|do|must) (?:i|we) do"
    r"|what are the steps|steps to)\b",
    re.IGNORECASE,
)
# "어떻게 되나요" asks "what is it" ("내선 번호가 어떻게 되나요?"), not how to do something
_PROCEDURE_KO = re.compile(r"어떻게(?!\s*되)|방법|절차")
# the marker of a numbered list's first item, right before the item's text on its line
_FIRST_STEP = re.compile(r"(?:^|\n)[ \t]*(?:1[.)]|①)[ \t]*$")
_VALUE_KINDS = frozenset({"number", "phone", "url", "email", "date", "time"})


@dataclass(frozen=True)
class QuestionCues:
    """What the question asks for."""

    wants_value: bool = False  # a number, amount, duration, extension, date, URL or e-mail
    procedural: bool = False  # the steps of a procedure
    types: frozenset[str] = frozenset()  # the answer types it asks for (rag.answer_type)


def question_cues(question: str) -> QuestionCues:
    """The cues of ``question`` (Korean patterns when it holds Hangul, English otherwise)."""
    types = question_types(question)
    if _HANGUL.search(question):
        value, procedure = _VALUE_KO, _PROCEDURE_KO
    else:
        value, procedure = _VALUE_EN, _PROCEDURE_EN
    return QuestionCues(bool(value.search(question)), bool(procedure.search(question)), types)


# the pieces are the stored chunks' own: the same texts come back turn after turn
@lru_cache(maxsize=16384)
def states_value(piece: str) -> bool:
    """Whether ``piece`` states a value a reader could act on (``rag.facts``' kinds, codes
    such as "H200" aside)."""
    return any(f.kind in _VALUE_KINDS for f in find_facts(piece))


def is_first_step(chunk_text: str, start: int) -> bool:
    """Whether the piece starting at ``start`` of ``chunk_text`` is the first item of a
    numbered list ("1." or "1)" before it on its line)."""
    line_start = chunk_text.rfind("\n", 0, start) + 1
    return _FIRST_STEP.search(chunk_text[max(0, line_start - 1) : start]) is not None
