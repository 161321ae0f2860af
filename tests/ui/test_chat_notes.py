"""The chat's notes for a turn that waits or fails: in the page's language, with a class that
names the case (what the load bench's browsers and the browser tests look for)."""

from __future__ import annotations

from ui.chat.view import error_note, waiting_note


def test_a_waiting_question_says_where_it_is_in_both_languages() -> None:
    assert "Your question is next" in waiting_note(0, "en")
    assert "1 question ahead of yours" in waiting_note(1, "en")
    assert "3 questions ahead of yours" in waiting_note(3, "en")
    assert "다음 차례" in waiting_note(0, "ko")
    assert "앞에 질문 3개" in waiting_note(3, "ko")
    assert all("class='turn-note waiting'" in waiting_note(n, "en") for n in (0, 1, 5))


def test_failure_notes_name_their_kind_and_keep_the_question() -> None:
    busy = error_note("busy", "queue full", "en")
    assert "class='turn-note busy'" in busy and "busy right now" in busy
    assert "press Send to retry" in busy
    assert "class='turn-note unavailable'" in error_note("unavailable", "refused", "ko")
    other = error_note("too_long", "<b>too long</b>", "en")
    assert "class='turn-note other'" in other and "&lt;b&gt;" in other  # escaped
