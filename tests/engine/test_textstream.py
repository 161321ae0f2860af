"""Tests for engine.embedded.textstream.TextStream with a byte-level fake tokenizer.

Each token id is one byte of UTF-8; decoding uses ``errors="replace"``, exactly like a
byte-level BPE tokenizer decoding an incomplete multi-byte character as U+FFFD.
"""

from __future__ import annotations

import pytest

from engine.embedded.textstream import REPLACEMENT, TextStream


def decode(ids: list[int]) -> str:
    return bytes(ids).decode("utf-8", errors="replace")


def ids_of(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def run(text: str, stops: tuple[str, ...] = ()) -> tuple[TextStream, list[str]]:
    """Push ``text`` byte by byte until the stream stops; return it and its non-empty deltas."""
    stream = TextStream(decode=decode, stops=stops)
    deltas = []
    for token in ids_of(text):
        delta = stream.push(token)
        if delta:
            deltas.append(delta)
        if stream.stopped:
            break
    return stream, deltas


KOREAN = "안녕하세요, 한빛로보틱스 헬프데스크입니다. 무엇을 도와드릴까요? 😀"


def test_fake_tokenizer_really_produces_replacement_chars():
    # guard for the test itself: a partial character decodes as U+FFFD
    assert decode(ids_of("안")[:2]) == REPLACEMENT


@pytest.mark.parametrize("text", [KOREAN, "plain ascii text", "mixé ünïcode – ok", "😀🎉"])
def test_byte_by_byte_never_emits_partial_characters(text):
    stream, deltas = run(text)
    assert deltas
    assert all(REPLACEMENT not in d for d in deltas)
    tail = stream.flush()
    assert REPLACEMENT not in tail
    assert "".join(deltas) + tail == text
    assert not stream.stopped


def test_korean_deltas_are_whole_characters_as_soon_as_complete():
    stream = TextStream(decode=decode)
    out = []
    for ch in "한빛":
        b = ids_of(ch)
        assert len(b) == 3
        assert stream.push(b[0]) == ""
        assert stream.push(b[1]) == ""
        out.append(stream.push(b[2]))
    assert out == ["한", "빛"]
    assert stream.flush() == ""


def test_flush_drops_a_trailing_incomplete_character():
    stream = TextStream(decode=decode)
    got = "".join(stream.push(t) for t in ids_of("ok 한")[:-1])  # last byte never arrives
    tail = stream.flush()
    assert got + tail == "ok "
    assert REPLACEMENT not in tail


# --- stop strings -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,stop",
    [
        ("Hello there</s>garbage after", "</s>"),
        ("답변입니다.\n\n질문: 다음", "\n\n질문:"),
        ("<|im_end|> right away", "<|im_end|>"),
        ("abc <<< almost <<<< done <<<<END more", "<<<<END"),
        ("aab aaab then", "aaab"),
    ],
)
def test_stop_string_cuts_text_and_never_leaks(text, stop):
    stream, deltas = run(text, stops=(stop,))
    assert stream.stopped
    tail = stream.flush()
    assert tail == ""  # once stopped, everything before the stop was already handed out
    out = "".join(deltas)
    # deltas cannot be taken back, so equality means no delta ever held part of the stop
    assert out == text[: text.index(stop)]
    assert stop not in out
    assert all(REPLACEMENT not in d for d in deltas)


def test_no_delta_contains_any_part_of_the_stop_string():
    stop = "###"
    text = "The answer is 42.###extra"
    stream, deltas = run(text, stops=(stop,))
    assert stream.stopped
    assert deltas and all("#" not in d for d in deltas)
    assert "".join(deltas) + stream.flush() == "The answer is 42."


def test_stop_prefix_is_held_back_until_decided():
    stream = TextStream(decode=decode, stops=("</s>",))
    assert "".join(stream.push(t) for t in ids_of("Hi ")) == "Hi "
    assert stream.push(ord("<")) == ""
    assert stream.push(ord("/")) == ""
    assert stream.push(ord("s")) == ""
    assert stream.push(ord(">")) == ""
    assert stream.stopped
    assert stream.flush() == ""
    assert stream.text == "Hi "


def test_partial_stop_prefix_released_by_later_push():
    stream = TextStream(decode=decode, stops=("</s>",))
    out = [stream.push(t) for t in ids_of("a </")]
    assert "".join(out) == "a "  # "</" held back
    assert stream.push(ord("b")) == "</b"  # not the stop after all: released
    assert not stream.stopped
    assert stream.flush() == ""


def test_partial_stop_prefix_released_by_flush():
    stream, deltas = run("the end </s", stops=("</s>",))
    assert not stream.stopped
    assert "".join(deltas) == "the end "
    assert stream.flush() == "</s"
    assert stream.flush() == ""  # flushing twice emits nothing more


def test_multiple_stops_earliest_wins():
    text = "alpha STOP2 beta STOP1 gamma"
    stream, deltas = run(text, stops=("STOP1", "STOP2"))
    assert stream.stopped
    assert "".join(deltas) + stream.flush() == "alpha "


def test_korean_stop_string_byte_by_byte():
    text = "첫째 줄입니다.\n사용자: 다음 질문"
    stop = "사용자:"
    stream, deltas = run(text, stops=(stop,))
    assert stream.stopped
    assert all(REPLACEMENT not in d for d in deltas)
    assert all("사" not in d for d in deltas)
    assert "".join(deltas) + stream.flush() == "첫째 줄입니다.\n"


def test_multi_byte_tokens():
    # tokens spanning several bytes, including ones that split a character across tokens
    data = KOREAN.encode()
    vocab: dict[int, bytes] = {}
    ids = []
    for i in range(0, len(data), 2):
        vocab[i] = data[i : i + 2]
        ids.append(i)

    def decode_pairs(token_ids: list[int]) -> str:
        return b"".join(vocab[t] for t in token_ids).decode("utf-8", errors="replace")

    stream = TextStream(decode=decode_pairs, stops=("?",))
    deltas = [stream.push(t) for t in ids]
    assert all(REPLACEMENT not in d for d in deltas)
    assert stream.stopped
    assert "".join(deltas) + stream.flush() == KOREAN[: KOREAN.index("?")]


def test_pushes_after_stop_emit_nothing():
    stream, deltas = run("yes</s>", stops=("</s>",))
    assert stream.stopped and "".join(deltas) == "yes"
    assert [stream.push(t) for t in ids_of(" more text 한")] == [""] * len(ids_of(" more text 한"))
    assert stream.flush() == ""
    assert stream.text == "yes"
