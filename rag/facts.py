"""Checkable facts in text, and whether a source states them (pure).

A fact is a span a reader could copy and act on: a URL, an e-mail address, a date, a clock
time, a phone number, a number (amounts with a currency, percentages, phone extensions, counts
with a unit such as "10 days" or "10일") or a code that mixes letters and digits ("H200").

Matching normalises both sides: thousand separators and trailing zeros ("3,350" = "3350",
"2.50" = "2.5"), Korean multipliers ("5만" = 50000), case and scheme for URLs and e-mail
addresses, trailing punctuation. A number's unit and currency are not compared: the check is
that the number itself comes from a source, not that the sentence uses it well (the lexical
check in ``rag.verify`` looks at the words around it). Dates compare their parts: every part
the answer states (year, month, day) must be stated by one source date.

Sources are read liberally (every digit run counts, "x3350" and "ext.3350" give 3350), answers
strictly, so a fact is flagged only when no reading of the source holds it. One exception
to the trailing zeros: an answer's integer written as a decimal ("The extension is 3.0") is
stated by a source only if the source writes it so too ("3.0", "3.00"), not by any "3" (a
small model reformats a number it picked from an unrelated "3 working days"); the other way
round, a source's "3.0" states an answer's "3".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Literal

FactKind = Literal["url", "email", "date", "time", "phone", "number", "code"]

_TLDS = (
    "com|org|net|io|ai|dev|app|kr|jp|cn|de|uk|us|eu|co|gov|edu|info|biz|me"
    "|example|local|internal|test|corp|lan"
)
_URL = re.compile(
    r"(?:https?://|www\.)[^\s<>\"'()\[\]\uac00-\ud7a3]+"
    rf"|(?<![\w@.-])(?:[a-z0-9-]+\.)+(?:{_TLDS})(?![A-Za-z0-9-])(?:/[^\s<>\"'()\[\]\uac00-\ud7a3]*)?",
    re.IGNORECASE,
)
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
_MONTHS = {
    m: i
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for m in names
}
_MONTH = r"(?P<mon>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_ORD = r"(?:st|nd|rd|th)?"
_DATES = [
    re.compile(r"(?<!\d)(?P<y>\d{4})[-./](?P<m>\d{1,2})[-./](?P<d>\d{1,2})(?!\d)"),
    re.compile(r"(?P<y>\d{4})\s*년\s*(?P<m>\d{1,2})\s*월(?:\s*(?P<d>\d{1,2})\s*일)?"),
    re.compile(r"(?<!\d)(?P<m>\d{1,2})\s*월\s*(?P<d>\d{1,2})\s*일"),
    re.compile(rf"\b{_MONTH}\s+(?P<d>\d{{1,2}}){_ORD}\b(?:,?\s+(?P<y>\d{{4}})\b)?", re.I),
    re.compile(rf"\b(?P<d>\d{{1,2}}){_ORD}\s+(?:of\s+)?{_MONTH}\b(?:,?\s+(?P<y>\d{{4}})\b)?", re.I),
    re.compile(rf"\b{_MONTH}\s+(?P<y>\d{{4}})\b", re.I),
    re.compile(r"(?<![\d/])(?P<a>\d{1,2})/(?P<b>\d{1,2})/(?P<c>\d{2,4})(?![\d/])"),
]
_TIME = re.compile(r"(?<![\d:])(?P<h>\d{1,2}):(?P<m>\d{2})(?![\d:])")
_PHONE = re.compile(
    r"(?<![\w+])(?:\+\d{1,3}[\s.-]?\d{1,4}[\s.-]|\(\d{1,4}\)[\s.-]?|\d{2,4}-)\d{3,4}[\s.-]?\d{4}(?!\d)"
)
_NUMBER = re.compile(
    r"(?<![A-Za-z\d])(?<!\d[.,])(?P<n>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)*)"
    r"(?P<mult>(?:\s?[천만억])+)?"
)
_UNIT_SUFFIX = re.compile(
    r"(?:st|nd|rd|th|am|pm|h|hr|hrs|min|mins|s|ms|kb|mb|gb|tb|k|km|kg|cm|mm|m|x|d|w|y|yrs|"
    r"gbps|mbps|ghz|mhz|px|pt)(?![A-Za-z\d])",
    re.IGNORECASE,
)
_CODE = re.compile(
    r"(?<![\w.-])(?=[\w.-]*[A-Za-z])(?=[\w.-]*\d)[A-Za-z\d]+(?:[-.][A-Za-z\d]+)*(?![\w-])"
)
_EXTENSION_X = re.compile(r"(?<![A-Za-z\d])x(\d{3,5})(?!\d)", re.IGNORECASE)
_MULTIPLIERS = {"천": 1000, "만": 10_000, "억": 100_000_000}
_TRAILING = ".,;:!?)]}'\"\u201d\u2019>"


@dataclass(frozen=True)
class Fact:
    """One checkable fact: ``text`` as written at ``start:end``, ``key`` its normal form."""

    text: str
    kind: FactKind
    key: str
    start: int
    end: int


def find_facts(text: str) -> list[Fact]:
    """The facts of ``text``, in order; a span belongs to at most one fact (first kind wins)."""
    taken: list[tuple[int, int]] = []
    out: list[Fact] = []

    def add(kind: FactKind, start: int, end: int, key: str) -> None:
        if any(s < end and start < e for s, e in taken):
            return
        taken.append((start, end))
        out.append(Fact(text[start:end], kind, key, start, end))

    for m in _EMAIL.finditer(text):
        add("email", m.start(), m.end(), m.group().lower())
    for m in _URL.finditer(text):
        end = m.end() - (len(m.group()) - len(m.group().rstrip(_TRAILING)))
        add("url", m.start(), end, url_key(text[m.start() : end]))
    for pattern in _DATES:
        for m in pattern.finditer(text):
            add("date", m.start(), m.end(), _date_key(m))
    for m in _TIME.finditer(text):
        if int(m["h"]) < 24 and int(m["m"]) < 60:
            add("time", m.start(), m.end(), f"{int(m['h'])}:{m['m']}")
    for m in _PHONE.finditer(text):
        add("phone", m.start(), m.end(), re.sub(r"\D", "", m.group()))
    for m in _EXTENSION_X.finditer(text):
        add("number", m.start(), m.end(), m.group(1))
    _add_numbers(text, add)
    return sorted(out, key=lambda f: f.start)


def _add_numbers(text: str, add: object) -> None:
    for m in _CODE.finditer(text):
        digits, unit = re.fullmatch(r"(\d*)(.*)", m.group()).groups()  # type: ignore[union-attr]
        if not (digits and _UNIT_SUFFIX.fullmatch(unit)):  # "24h", "3rd" are numbers
            add("code", m.start(), m.end(), _compact(m.group()))  # type: ignore[operator]
    for m in _NUMBER.finditer(text):
        raw = m["n"]
        if raw.count(".") > 1:  # a version or a dotted code: compared as written
            key, end = raw, m.end("n")
        else:
            key, end = number_key(raw, m["mult"]), m.end()
            if key and _ZERO_FRACTION.search(raw) and not m["mult"]:
                key += "."  # "3.0": only a source that writes 3.0 (or 3.00) states it
        if re.match(r"[A-Za-z]", text[m.end("n") : m.end("n") + 1]) and not _UNIT_SUFFIX.match(
            text, m.end("n")
        ):
            continue  # digits run into letters: a code
        if key:
            add("number", m.start(), end, key)  # type: ignore[operator]


# a fraction of zeros only ("3.0", "90.00"): the number is an integer written as a decimal
_ZERO_FRACTION = re.compile(r"^[\d,]+\.0+$")


def number_key(raw: str, multipliers: str | None = None) -> str:
    """The normal form of a number: no separators, no trailing zeros, multipliers applied."""
    try:
        value = Decimal(raw.replace(",", ""))
    except InvalidOperation:
        return ""
    for ch in (multipliers or "").replace(" ", ""):
        value *= _MULTIPLIERS[ch]
    text = format(value.normalize(), "f")
    return text


def url_key(url: str) -> str:
    """A URL without scheme, ``www.``, trailing slash or punctuation, lowercased."""
    key = url.lower().rstrip(_TRAILING)
    key = re.sub(r"^(?:https?://)?(?:www\.)?", "", key)
    return key.rstrip("/")


def _compact(text: str) -> str:
    return re.sub(r"[\s\-_]", "", text.lower())


def _date_key(m: re.Match[str]) -> str:
    groups = m.groupdict()
    if "a" in groups:  # d/m/y or m/d/y: kept as written
        return f"{int(m['a'])}/{int(m['b'])}/{m['c']}"
    month = groups.get("m") or str(_MONTHS[m["mon"].lower().rstrip(".")])
    parts = [
        groups.get("y") or "",
        str(int(month)),
        str(int(groups["d"])) if groups.get("d") else "",
    ]
    return "-".join(parts)


@dataclass(frozen=True)
class SourceFacts:
    """What one source text states, read liberally, for ``holds``."""

    keys: frozenset[tuple[str, str]]  # (kind, key)
    numbers: frozenset[str]
    phones: tuple[str, ...]
    dates: tuple[tuple[str, str, str], ...]
    lower: str  # the text lowercased, for URLs and e-mail addresses
    compact: str  # lowercased without spaces, hyphens and underscores, for codes

    @classmethod
    def of(cls, text: str) -> SourceFacts:
        """Read one source text."""
        facts = find_facts(text)
        numbers = {f.key for f in facts if f.kind == "number"}
        for m in re.finditer(r"\d+(?:[.,]\d+)*", text):  # every digit run, however written
            numbers.add(number_key(m.group()) or m.group())
            if _ZERO_FRACTION.search(m.group()):
                numbers.add(number_key(m.group()) + ".")
            numbers.update(number_key(d) for d in re.findall(r"\d+", m.group()))
        for m in _NUMBER.finditer(text):
            if m["mult"]:
                numbers.add(number_key(m["n"], m["mult"]))
        dates = tuple(tuple(f.key.split("-")) for f in facts if f.kind == "date" and "-" in f.key)
        return cls(
            keys=frozenset((f.kind, f.key) for f in facts),
            numbers=frozenset(numbers),
            phones=tuple(f.key for f in facts if f.kind == "phone"),
            dates=dates,  # type: ignore[arg-type]
            lower=text.lower(),
            compact=_compact(text),
        )

    def holds(self, fact: Fact) -> bool:
        """Whether this source states ``fact``."""
        if (fact.kind, fact.key) in self.keys:
            return True
        if fact.kind == "number":
            return fact.key in self.numbers
        if fact.kind == "url":
            return fact.key in self.lower or fact.key in {
                k for kind, k in self.keys if kind == "url"
            }
        if fact.kind == "email":
            return fact.key in self.lower
        if fact.kind == "code":
            return fact.key in self.compact
        if fact.kind == "phone":
            return any(p.endswith(fact.key) or fact.key.endswith(p) for p in self.phones)
        if fact.kind == "time":
            hour, minutes = fact.key.split(":")
            return minutes == "00" and hour in self.numbers
        if fact.kind == "date":
            return self._holds_date(fact.key)
        return False

    def _holds_date(self, key: str) -> bool:
        if "/" in key:
            return key in self.lower
        wanted = key.split("-")
        for date in self.dates:
            if all(not w or w == d for w, d in zip(wanted, date, strict=True)):
                return True
        return False
