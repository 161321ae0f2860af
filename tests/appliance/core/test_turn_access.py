"""What a reader is still given of a stored conversation once a collection is revoked
(``turn_access``, pure): the turns that used a chunk they may no longer read are withheld from
later prompts, and the history shows none of its text."""

from __future__ import annotations

from appliance.core.services.turn_access import shown_answer, withheld
from appliance.core.services.turn_history import StoredTurn
from rag.layout import APPEND, SentTurn
from ui.format import citations_html

SECRET, OPEN = 7, 3


def readable(chunk_id: int) -> bool:
    return chunk_id != SECRET


def cited(chunk_id: int, number: int) -> dict:
    where = {"document_id": 1, "title": "Doc", "section": "", "page": None, "source": "d.md"}
    return {"number": number, "chunk_id": chunk_id, **where, "text": f"Text {chunk_id}."}


def turn(rendered: tuple[tuple[int, int], ...], citations: list[dict]) -> StoredTurn:
    return StoredTurn(SentTurn(APPEND, "Q?", "Q?", "", rendered), "A.", citations)


def test_turns_that_rendered_or_cited_an_unreadable_chunk_are_withheld() -> None:
    turns = [
        turn(((SECRET, 1), (OPEN, 2)), [cited(SECRET, 1), cited(OPEN, 2)]),  # rendered it
        turn((), [cited(SECRET, 1)]),  # cited it (rendered by the turn before)
        turn(((9, 3),), [cited(9, 3), cited(OPEN, 2)]),
    ]
    assert withheld(turns, readable) == {0, 1}
    assert withheld(turns, lambda _cid: True) == frozenset()


def test_the_history_shows_no_text_of_an_unreadable_chunk() -> None:
    card = [
        {"number": 1, "chunk_id": SECRET, "start": 0, "end": 5, "text": "Text 7."},
        {"number": 2, "chunk_id": OPEN, "start": 0, "end": 5, "text": "Text 3."},
    ]
    citations = [cited(SECRET, 1), cited(OPEN, 2)]
    grounded = shown_answer("Q?", "A [1].", "grounded", citations, card, readable)
    assert grounded.content == "A [1]." and grounded.verdicts_apply  # the reader's own answer
    assert grounded.citations[0] | {"text": "Text 7."} == citations[0] | {"withheld": True}
    assert grounded.citations[0]["text"] == "" and grounded.citations[1] == citations[1]
    assert [s["chunk_id"] for s in grounded.evidence] == [OPEN]
    # an extractive answer is the card: made again from the sentences left
    quoted = shown_answer("Q?", "Text 7. [1]\nText 3. [2]", "extractive", citations, card, readable)
    assert quoted.content == "Text 3. [2]" and not quoted.verdicts_apply
    none = shown_answer("질문?", "Text 7. [1]", "extractive", citations, card[:1], readable)
    assert none.content.startswith("문서에서") and none.evidence == []
    # the sources list says the document is closed, and shows none of it
    html = citations_html(grounded.citations, "en", grounded.evidence)
    assert "no longer open to you" in html and "Text 7." not in html and "Text 3." in html
