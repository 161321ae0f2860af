"""How the card reads a manual, with the real embedder and Kiwi: a shortcut or menu path counts
as holding the question's word for it, a label is never quoted alone, and a what-to-do
question reads on into the next sentence or the first step. The texts are written for these
tests (no benchmark set's wording)."""

from __future__ import annotations

import pytest

from rag.answer_cues import question_cues
from rag.answer_type import KEY, MENU, TIME, carried, question_types, type_words
from rag.bm25_tokenizer import Tokenizer
from rag.evidence import EvidenceCandidate, rank_evidence
from rag.piece_vectors import build_pieces


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer()


def _card(embedder, tokenizer, question: str, texts: list[str], k: int = 2):  # noqa: ANN001, ANN202
    header = [f"Manual > Part {i}\n{t}" for i, t in enumerate(texts)]
    _, pieces = build_pieces(embedder, header, texts, tokenizer)
    cands = [EvidenceCandidate(i, t, p) for i, (t, p) in enumerate(zip(texts, pieces, strict=True))]
    vec = embedder.embed([question])[0]
    terms = tokenizer.tokenize(question)
    return rank_evidence(vec, terms, cands, k=k, cues=question_cues(question))


def test_time_is_an_answer_type() -> None:
    assert TIME in question_types("At what time does the lab close?")
    assert TIME in question_types("Which hours must I keep free for meetings?")
    assert TIME in question_types("회의실은 몇 시에 문을 닫나요?")
    assert TIME not in question_types("How many rooms are there?")
    wanted = frozenset({TIME})
    assert carried("The lab closes at 21:30 on weekdays.", wanted) == wanted
    assert carried("Doors open at 8 a.m. sharp.", wanted) == wanted
    assert carried("오후 6시에 문을 닫습니다.", wanted) == wanted
    assert not carried("Version 3.11 added it; see section 12.", wanted)
    assert not carried("회의는 2시간 걸립니다.", wanted)  # a duration, not a time of day


def test_type_words_are_the_question_words_for_the_kind() -> None:
    assert type_words(["그리기", "단축", "키"], frozenset({KEY})) == ("단축", "키")
    assert type_words(["Export", "menu", "pdf"], frozenset({MENU})) == ("menu",)
    assert type_words(["export", "menu"], frozenset()) == ()


DRAW_KO = (
    "이 페이지에는 LibreOffice 그리기의 기본 단축키 목록이 있습니다. "
    "일부 단축키는 운영 체제가 먼저 사용할 수 있습니다.\n\n"
    "단축키\n효과\nCtrl + G\n개체 그룹 만들기\nCtrl + Shift + G\n그룹 해제\n"
    "Ctrl + Alt + R\n개체 회전\n"
)


def test_a_shortcut_row_outranks_the_sentence_naming_shortcuts(embedder, tokenizer) -> None:  # noqa: ANN001
    spans = _card(embedder, tokenizer, "그리기에서 개체를 회전하는 단축키는 무엇인가요?", [DRAW_KO])
    assert "Ctrl + Alt + R" in spans[0].text, [s.text for s in spans]
    # the table's header cell is a label: never a unit of its own
    assert all(s.text.strip() not in ("단축키", "효과") for s in spans)


MENU_KO = (
    "보고서 마법사는 데이터를 요약합니다. 목록을 보려면 보기 - 목록 보기를 선택합니다.\n\n"
    "자동 저장을 켜려면 도구 - 옵션 - 불러오기/저장 - 자동 저장을 선택합니다. "
    "켜진 항목 옆에는 확인 표시가 나타납니다.\n"
)


def test_a_menu_path_counts_as_naming_the_menu(embedder, tokenizer) -> None:  # noqa: ANN001
    spans = _card(embedder, tokenizer, "자동 저장을 켜는 메뉴는 무엇인가요?", [MENU_KO])
    assert "도구 - 옵션 - 불러오기/저장 - 자동 저장" in spans[0].text, [s.text for s in spans]


CASE_EN = (
    "Lab equipment is booked through the inventory portal.\n\n"
    "If a soldering iron overheats or smokes, switch it off at the wall at once. "
    "Then tell the lab manager on extension 5521 and label the iron as faulty.\n\n"
    "If you lose a lab key, do not borrow one from a colleague.\n\n"
    "1. Report the loss to the front desk on extension 6610.\n"
    "2. Collect a day key with your badge.\n"
)


def test_a_what_to_do_question_reads_on_into_the_action(embedder, tokenizer) -> None:  # noqa: ANN001
    question = "My soldering iron started to smoke. What should I do?"
    assert question_cues(question).procedural
    spans = _card(embedder, tokenizer, question, [CASE_EN])
    assert spans[0].text.startswith("If a soldering iron overheats")
    assert "extension 5521" in spans[0].text
    assert CASE_EN[spans[0].start : spans[0].end] == spans[0].text  # one verbatim span


def test_a_case_before_a_numbered_list_reads_on_into_its_first_step(embedder, tokenizer) -> None:  # noqa: ANN001
    spans = _card(embedder, tokenizer, "What should I do if I lose my lab key?", [CASE_EN])
    assert spans[0].text.startswith("If you lose a lab key")
    assert "extension 6610" in spans[0].text and "day key" not in spans[0].text


def test_a_question_that_is_no_procedure_quotes_one_sentence(embedder, tokenizer) -> None:  # noqa: ANN001
    spans = _card(
        embedder, tokenizer, "Who do I tell about an overheating soldering iron?", [CASE_EN]
    )
    assert spans and all("\n\n" not in s.text for s in spans)
    assert not any(s.text.startswith("If a soldering iron") and "5521" in s.text for s in spans)
