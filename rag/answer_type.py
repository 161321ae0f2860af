"""Expected answer types (pure): what kind of short fact a question asks for, and which kinds a
piece of text carries, in English and Korean.

The classic answer-type step of factoid QA, kept to the kinds a manual or a handbook states as
one short fact: a number or quantity ("how many", "which port", "몇"), a default ("by default",
"기본값"), a command-line option ("--data-checksums"), an environment variable ("PGPORT"), a
file, directory or path ("pg_hba.conf", "~/.psqlrc"), a command ("createdb mydb"), a key or
shortcut ("Ctrl + F12", "F5 키"), a menu path ("도구 - 업데이트 - 링크") and a time of day
("10:00", "오후 3시"). The patterns read the shape of the text only (words of the question,
shapes of the piece), no vocabulary of a corpus. ``rag.evidence`` lifts the pieces that carry
what the question asks for, and reads them with the sentence before them
(``rag.evidence_passage``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

NUMBER, DEFAULT, OPTION, ENV_VAR, PATH, COMMAND, KEY, MENU, TIME = (
    "number",
    "default",
    "option",
    "env_var",
    "path",
    "command",
    "key",
    "menu",
    "time",
)
ANSWER_TYPES = (NUMBER, DEFAULT, OPTION, ENV_VAR, PATH, COMMAND, KEY, MENU, TIME)

_HANGUL = re.compile(r"[\uac00-\ud7a3]")
_I = re.IGNORECASE

# what the question asks for
_ASKS_EN: dict[str, re.Pattern[str]] = {
    NUMBER: re.compile(
        r"\bhow (?:much|many|large|big|long|often|fast|soon|far|high|low|old|wide)\b"
        r"|\b(?:what|which)\b[^?]{0,30}?\b(?:port|size|number|version|precision|percentage"
        r"|year|limit|timeout|delay|width|length|amount|count)\b"
        r"|\babove what\b|\bbelow what\b",
        _I,
    ),
    DEFAULT: re.compile(
        r"\bdefaults?\b|\busual(?:ly)?\b|\btypical(?:ly)?\b|\bnormally\b"
        r"|\b(?:is|are) (?:given|specified|set) no\b|\bwhen none\b"
        r"|\bnot (?:set|given|specified)\b",
        _I,
    ),
    OPTION: re.compile(r"\b(?:option|flag|switch)s?\b", _I),
    ENV_VAR: re.compile(r"\benvironment variables?\b", _I),
    PATH: re.compile(r"\b(?:file|directory|folder|path|filename)s?\b|\bwhere\b", _I),
    COMMAND: re.compile(r"\b(?:command|program)s?\b", _I),
    KEY: re.compile(r"\b(?:shortcut|keys?|keystroke|key combination)\b|\bpress\b", _I),
    MENU: re.compile(r"\bmenus?\b", _I),
    TIME: re.compile(
        r"\b(?:what|which) (?:times?|hours?)\b|\bat what time\b"
        r"|\bwhen (?:does|do|is|are|can|should|must|will)\b",
        _I,
    ),
}
_ASKS_KO: dict[str, re.Pattern[str]] = {
    NUMBER: re.compile(r"몇|얼마|크기|포트|버전"),
    DEFAULT: re.compile(r"기본값|기본 ?설정|기본으로|기본적으로"),
    OPTION: re.compile(r"옵션"),
    ENV_VAR: re.compile(r"환경 ?변수"),
    PATH: re.compile(r"파일|디렉터리|폴더|경로|어디"),
    KEY: re.compile(r"단축키|(?:어떤|무슨|어느) 키|키를 누르|키는"),
    MENU: re.compile(r"메뉴|명령"),
    TIME: re.compile(r"몇 ?시|언제|시간대|시각"),
}

# what a piece carries: cheap shapes (no nested repetition), tried only for the wanted types
_NUMBER_WORDS = frozenset(
    ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven")
    + ("twelve", "fifteen", "twenty", "thirty", "forty", "fifty", "sixty", "hundred")
    + ("thousand", "million", "billion")
)
_DEFAULT_WORDS = frozenset(
    ("default", "defaults", "defaulted", "normally", "usually", "typically", "standard")
)
_KOREAN_NUMBER = re.compile(r"(?:^|\s)(?:한|두|세|네|다섯|여섯|일곱|여덟|아홉|열) ?[가-힣]")
_WORD = re.compile(r"[a-z]+")
# a number of its own: not the digit of a name ("sqlite3", "F12", "H200")
_DIGIT = re.compile(r"(?<![A-Za-z_])\d")
# a parameter with its value in a signature or a config line ("compresslevel=9")
_ASSIGNED = re.compile(r"\w=[^\s=]")
_CARRIES: dict[str, re.Pattern[str]] = {
    OPTION: re.compile(r"(?<![\w-])--?[A-Za-z]"),
    ENV_VAR: re.compile(r"\b[A-Z][A-Z0-9_]{3,}\b"),
    PATH: re.compile(r"\w/[\w.]|~/|\\\w|\w\.[A-Za-z]{2,6}\b|[A-Za-z]_[A-Za-z0-9]"),
    COMMAND: re.compile(r"(?m:^[ \t]*[$#>] )|\w\(|\w=\S|\s--?[A-Za-z]|\w/\w"),
    KEY: re.compile(
        r"(?<![A-Za-z])(?:Ctrl|Shift|Alt|Cmd|Command|Option|Esc|Enter|Tab|Space|Home|End"
        r"|PgUp|PgDn|Backspace|Delete|Insert|F[1-9]|F1[0-2])(?![A-Za-z0-9])"
    ),
    MENU: re.compile(r"\S\s-\s\S|\S\s?>\s?\S|→"),
    # a time of day: "10:00", "9 a.m.", "오후 3시", "09시"
    TIME: re.compile(
        r"(?<![\d:])\d{1,2}:\d{2}(?![\d:])|\b\d{1,2} ?(?:[ap]\.m\.|[ap]m\b)"
        r"|(?:오전|오후) ?\d{1,2} ?시|(?<!\d)\d{1,2}시(?![간대])",
        _I,
    ),
}

# the question's own words for the kind of answer it asks for ("단축키" / "shortcut", "메뉴"):
# a piece that carries that kind states it by its shape ("Ctrl + J", "도구 - 옵션"), not by
# the word, so ``rag.evidence`` counts these words as found in it. Only for the kinds whose
# shape is unmistakable: an upper-case word or a dotted name is no sure environment variable
# or file, and crediting "environment variable" to every piece with one lost two questions
# of the real English sets (dev and held-out) where the answer's sentence says the words
_TYPE_WORDS: dict[str, frozenset[str]] = {
    KEY: frozenset(("shortcut", "shortcuts", "key", "keys", "keystroke", "keyboard"))
    | frozenset(("단축", "단축키", "키")),
    MENU: frozenset(("menu", "menus", "메뉴", "명령", "명령어")),
    TIME: frozenset(("time", "times", "hour", "hours", "시간", "시각", "시간대")),
}


def question_types(question: str) -> frozenset[str]:
    """The answer types ``question`` asks for (Korean patterns when it holds Hangul); none
    when it asks for no short fact of a known kind."""
    asks = _ASKS_KO if _HANGUL.search(question) else _ASKS_EN
    return frozenset(kind for kind, pattern in asks.items() if pattern.search(question))


def type_words(terms: Sequence[str], wanted: frozenset[str]) -> tuple[str, ...]:
    """The question ``terms`` (its BM25 tokens) that name a ``wanted`` answer type
    ("단축", "키" of "단축키는"; "menu"), lowercased, in question order."""
    words = frozenset().union(*(_TYPE_WORDS.get(kind, ()) for kind in wanted))
    return tuple(t for t in (term.lower() for term in terms) if t in words)


def _carries(piece: str, kind: str) -> bool:
    if kind == NUMBER:
        if _DIGIT.search(piece) or _KOREAN_NUMBER.search(piece):
            return True
        return not _NUMBER_WORDS.isdisjoint(_WORD.findall(piece.lower()))
    if kind == DEFAULT:
        if "기본" in piece or _ASSIGNED.search(piece):
            return True
        return not _DEFAULT_WORDS.isdisjoint(_WORD.findall(piece.lower()))
    return _CARRIES[kind].search(piece) is not None


def written_in(piece: str, korean: bool) -> bool:
    """Whether ``piece`` reads in the question's language (Korean or not), or holds no prose
    of another one: an English sentence left untranslated in a Korean manual does not answer
    a Korean question, and its types do not count (a key or a menu path counts anywhere)."""
    if korean:
        return _HANGUL.search(piece) is not None or len(_WORD.findall(piece.lower())) <= 4
    return _HANGUL.search(piece) is None


# the pieces are the stored chunks' own: the same texts come back turn after turn
@lru_cache(maxsize=32768)
def carried(piece: str, wanted: frozenset[str]) -> frozenset[str]:
    """The ``wanted`` answer types that ``piece`` carries (a number, a default, an option,
    ...)."""
    return frozenset(kind for kind in wanted if _carries(piece, kind))
