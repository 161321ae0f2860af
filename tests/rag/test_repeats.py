"""The repeat guard: a repeated sentence or a thrice-said run of words stops the answer, and
the repeat is never released to the reader, whatever the delta boundaries."""

from __future__ import annotations

import pytest

from rag.repeats import RepeatGuard


def _stream(text: str, step: int) -> tuple[str, RepeatGuard]:
    guard = RepeatGuard()
    shown = ""
    for i in range(0, len(text), step):
        shown += guard.push(text[i : i + step])
        if guard.repeated:
            break
    else:
        shown += guard.finish()
    return shown, guard


LOOP = (
    "To reset your password, open the portal. Click Reset password on the page. "
    "Click Reset password on the page. Click Reset password on the page. Click Res"
)


@pytest.mark.parametrize("step", [1, 3, 7, 1000])
def test_a_repeated_sentence_is_never_shown(step: int) -> None:
    shown, guard = _stream(LOOP, step)
    assert guard.repeated
    assert (
        shown.rstrip()
        == "To reset your password, open the portal. Click Reset password on the page."
    )
    assert guard.answer == shown


@pytest.mark.parametrize("step", [1, 4, 1000])
def test_text_that_does_not_repeat_streams_unchanged(step: int) -> None:
    text = (
        "Open the portal. Click Reset password. Click the link in the e-mail.\n"
        "1. Type the new password twice.\n2. Wait five minutes. Done"
    )
    shown, guard = _stream(text, step)
    assert not guard.repeated and shown == text and guard.answer == text


def test_a_sentence_is_held_only_while_it_reads_like_one_said_before() -> None:
    guard = RepeatGuard()
    assert guard.push("Click Reset password now. ") == "Click Reset password now. "
    assert guard.push("Click Reset") == ""  # it could be the same sentence again
    assert guard.push(" the link.") == "Click Reset the link."
    assert not guard.repeated


def test_short_sentences_may_repeat() -> None:
    text = "Yes. Yes. It is free. It is free."  # under four words: not a loop
    shown, guard = _stream(text, 2)
    assert not guard.repeated and shown == text


def test_a_run_said_three_times_inside_one_sentence_stops() -> None:
    run = "the helpdesk will lock the device and revoke its certificate "
    text = "First, " + run + "and then " + run + "and then " + run + "and then"
    shown, guard = _stream(text, 5)
    assert guard.repeated
    assert shown.count("revoke its certificate") <= 2
    assert guard.answer == shown


def test_korean_repeats_stop_too() -> None:
    sentence = "로그인에 5회 연속 실패하면 계정이 15분간 잠깁니다. "
    shown, guard = _stream("계정 잠금 안내입니다. " + sentence * 4, 3)
    assert guard.repeated and shown.rstrip() == "계정 잠금 안내입니다. " + sentence.rstrip()


def test_an_answer_ending_on_a_repeat_drops_it() -> None:
    text = "Call extension 4357 right away. Call extension 4357 right away."
    shown, guard = _stream(text, 1000)
    assert guard.repeated and shown == "Call extension 4357 right away."
    assert guard.push("more") == "" and guard.finish() == ""


def test_a_continuation_may_not_repeat_what_the_answer_said() -> None:
    before = "Open the portal at https://id.hanbit.example/reset. Click Reset password now. "
    guard = RepeatGuard(said_before=before)
    assert guard.push("Then wait five minutes. ") == "Then wait five minutes. "
    assert guard.push("Click Reset password now. Again") == ""
    assert guard.repeated and guard.answer.rstrip() == "Then wait five minutes."
