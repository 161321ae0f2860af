"""Expected answer types: what a question asks for, and what a piece carries (pure)."""

from __future__ import annotations

import pytest

from rag.answer_type import (
    COMMAND,
    DEFAULT,
    ENV_VAR,
    KEY,
    MENU,
    NUMBER,
    OPTION,
    PATH,
    carried,
    question_types,
    written_in,
)


@pytest.mark.parametrize(
    ("question", "types"),
    [
        ("How much memory does the server use by default?", {NUMBER, DEFAULT}),
        ("Which port does the mail client use when none is given?", {NUMBER, DEFAULT}),
        ("Which initdb option turns on checksums?", {OPTION}),
        ("Which environment variable sets the port?", {ENV_VAR}),
        ("Where does the shell keep its history?", {PATH}),
        ("What command creates a database?", {COMMAND}),
        ("What is the shortcut for bold text?", {KEY}),
        ("Who owns the items bought with the stipend?", set()),
        ("표를 삽입하는 단축키는 무엇인가요?", {KEY}),
        ("하이픈 넣기를 실행하는 메뉴는 무엇인가요?", {MENU}),
        ("이름은 최소 몇 자 이상 입력해야 하나요?", {NUMBER}),
        ("비밀번호 규칙은 무엇인가요?", set()),
    ],
)
def test_question_types(question: str, types: set[str]) -> None:
    assert question_types(question) == frozenset(types)


def test_pieces_carry_their_shapes() -> None:
    assert (
        len(carried("The default is typically 128 megabytes.", frozenset({NUMBER, DEFAULT}))) == 2
    )
    assert len(carried("It defaults to three connections.", frozenset({NUMBER, DEFAULT}))) == 2
    assert len(carried("Sets the amount of memory for buffers.", frozenset({NUMBER, DEFAULT}))) == 0
    assert len(carried("--data-checksums", frozenset({OPTION}))) == 1
    assert len(carried("Use checksums on data pages.", frozenset({OPTION}))) == 0
    assert len(carried("PGPORT behaves the same as the port parameter.", frozenset({ENV_VAR}))) == 1
    assert len(carried("psql reads ~/.psqlrc at start-up.", frozenset({PATH}))) == 1
    assert len(carried("Edit the pg_hba.conf file.", frozenset({PATH}))) == 1
    assert len(carried("$ createdb mydb", frozenset({COMMAND}))) == 1
    assert len(carried("Ctrl + F12 표 삽입", frozenset({KEY}))) == 1
    assert len(carried("내비게이터를 열려면 F5 키를 누릅니다.", frozenset({KEY}))) == 1
    assert len(carried("표 - 셀 병합을 선택합니다.", frozenset({MENU}))) == 1
    assert len(carried("이름을 다섯 글자 이상 입력합니다.", frozenset({NUMBER}))) == 1
    assert len(carried("anything at all", frozenset())) == 0


def test_a_piece_in_another_language_does_not_answer() -> None:
    assert written_in("표 - 셀 병합을 선택합니다.", korean=True)
    assert written_in("Ctrl + F12", korean=True)  # a key line reads in any language
    assert not written_in("Choose Tools - Options - LibreOffice Writer - Formatting Aids.", True)
    assert written_in("Choose Tools - Options.", korean=False)
    assert not written_in("표 - 셀 병합을 선택합니다.", korean=False)
