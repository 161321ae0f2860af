"""Sentence, list-item and table-row splitting with exact offsets (English and Korean)."""

from __future__ import annotations

import pytest

from rag.sentences import Piece, split_pieces

ENGLISH = """# Travel Desk

Book travel through the Travel Desk, e.g. flights and hotels. Mr. Park approves trips over \
$1,500.00 per day. Call ext. 3350 or write to travel@hanbit.example. The portal is at \
https://people.hanbit.example/travel?x=1. Version 2.4.1 fixed it! Is 3.5% enough?
Phone: 3350
Hours: 9 a.m. to 5 p.m. on weekdays, i.e. Monday to Friday

- Economy class for flights under 6 hours.
  Business class needs approval.
* Per-diem is 3.5% of the base.
1. Open "Spend".
2) Click "New claim".

| Item | Limit |
|------|------:|
| Hotel | 150 USD |
|  |  |

> Quoted note. Second one.
"""

KOREAN = """## 병가

유급 병가는 연 10일입니다. 신청은 HR 포털(https://people.hanbit.example)에서 하세요! \
문의: 내선 3350.
- 연속 3일을 넘는 경우 진단서를 제출합니다.

| 항목 | 일수 |
|---|---|
| 병가 | 10일 |
"""


def texts(text: str) -> list[tuple[str, str]]:
    return [(p.kind, text[p.start : p.end]) for p in split_pieces(text)]


def test_english_passage_splits_into_sentences_items_and_rows() -> None:
    assert texts(ENGLISH) == [
        ("sentence", "Book travel through the Travel Desk, e.g. flights and hotels."),
        ("sentence", "Mr. Park approves trips over $1,500.00 per day."),
        ("sentence", "Call ext. 3350 or write to travel@hanbit.example."),
        ("sentence", "The portal is at https://people.hanbit.example/travel?x=1."),
        ("sentence", "Version 2.4.1 fixed it!"),
        ("sentence", "Is 3.5% enough?"),
        ("sentence", "Phone: 3350"),
        ("sentence", "Hours: 9 a.m. to 5 p.m. on weekdays, i.e. Monday to Friday"),
        ("item", "Economy class for flights under 6 hours.\n  Business class needs approval."),
        ("item", "Per-diem is 3.5% of the base."),
        ("item", 'Open "Spend".'),
        ("item", 'Click "New claim".'),
        ("row", "Item | Limit"),
        ("row", "Hotel | 150 USD"),
        ("sentence", "Quoted note."),
        ("sentence", "Second one."),
    ]


def test_english_offsets_are_exact() -> None:
    pieces = split_pieces(ENGLISH)
    first = ENGLISH.index("Book travel")
    assert pieces[0] == Piece(first, first + 61, "sentence")
    row = ENGLISH.index("Hotel | 150")
    assert pieces[13] == Piece(row, row + len("Hotel | 150 USD"), "row")
    for p in pieces:  # stripped, in order, never overlapping, never empty
        assert p.start < p.end
        piece = ENGLISH[p.start : p.end]
        assert piece == piece.strip() and not piece.startswith(("- ", "* ", "|"))
    assert all(a.end <= b.start for a, b in zip(pieces, pieces[1:], strict=False))


def test_korean_passage_uses_kiwi_with_exact_offsets() -> None:
    assert texts(KOREAN) == [
        ("sentence", "유급 병가는 연 10일입니다."),
        ("sentence", "신청은 HR 포털(https://people.hanbit.example)에서 하세요!"),
        ("sentence", "문의: 내선 3350."),
        ("item", "연속 3일을 넘는 경우 진단서를 제출합니다."),
        ("row", "항목 | 일수"),
        ("row", "병가 | 10일"),
    ]
    first = KOREAN.index("유급")
    assert split_pieces(KOREAN)[0] == Piece(
        first, first + len("유급 병가는 연 10일입니다."), "sentence"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Dr. Kim and Prof. Lee met at 10.30 today. They agreed.", 2),
        ("See Fig. 3 for details. The value is 3.14159.", 2),
        ("Send it to j.doe@hanbit.example. Then wait.", 2),
        ("The limit is 10. Then it resets.", 2),
        ("Steps: 1. Open Spend. 2. Click New claim.", 2),
        ("Use HanbitConnect v2.4 etc. Then reboot.", 2),
        ("J. R. Smith wrote it. Nobody else did.", 2),
        ("Stop! Wait? Go on.", 3),
        ("A sentence without an end", 1),
        ("The U.S. office is closed.", 1),
        ("Wrapped text that goes\nacross lines stays one sentence.", 1),
        ("Name: Travel Desk\nPhone: 3350", 2),
        # a lowercase label line after a finished sentence is a piece of its own
        ("The default is off.\nssl_ca_file (string)\nSpecifies the file.", 3),
        ("Lines wrapped after e.g.\nthe abbreviation stay one sentence.", 1),
    ],
)
def test_english_rules(text: str, expected: int) -> None:
    assert len(split_pieces(text)) == expected, texts(text)


def test_headings_separators_and_blank_text_give_no_pieces() -> None:
    assert split_pieces("") == []
    assert split_pieces("   \n\n\t\n") == []
    assert split_pieces("# Title\n\n---\n\n|---|---|\n| | |\n") == []


def test_code_lines_stand_alone() -> None:
    text = "Run this:\n```\nvpn reset --user me\n```\nThen log in."
    assert texts(text) == [
        ("sentence", "Run this:"),
        ("sentence", "vpn reset --user me"),
        ("sentence", "Then log in."),
    ]


def test_mixed_korean_and_english_paragraphs() -> None:
    text = (
        "VPN resets take 5 minutes. Use id.hanbit.example.\n\n"
        "비밀번호는 90일마다 바꿉니다. 12자 이상이어야 합니다."
    )
    assert texts(text) == [
        ("sentence", "VPN resets take 5 minutes."),
        ("sentence", "Use id.hanbit.example."),
        ("sentence", "비밀번호는 90일마다 바꿉니다."),
        ("sentence", "12자 이상이어야 합니다."),
    ]


def test_bad_input_is_refused() -> None:
    with pytest.raises(TypeError, match="expects str"):
        split_pieces(b"bytes")  # type: ignore[arg-type]
