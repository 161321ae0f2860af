"""Incremental decoding in TextStream: its text always equals decoding every id, with the real
SmolLM2 tokenizer, a SentencePiece-style tokenizer (Metaspace, trained here) and a decoder
whose clean-up rule crosses token boundaries; and a token's cost does not grow with the text."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from engine.embedded.textstream import REPLACEMENT, SETTLE_EVERY, TextStream

TEXTS = [
    'The VPN client reconnects after 30 seconds; see section 4.2 ("Remote access").\n\n- a\n- b',
    "연차 휴가는 입사 1년 후부터 15일이 주어지며, 3년마다 1일씩 늘어납니다. 😀 문의: 인사팀.",
    "def f(x):\n    return {'a': [1, 2, 3]}  # naïve café – ok?  don't, won't, it's .",
    "混合 text: 東京 and München, ½ × 3 = 1.5 🎉🎉 end.",
]


def check_stream(  # noqa: ANN001
    decode, ids: list[int], stops: tuple[str, ...] = (), *, deltas_add_up: bool = True
) -> TextStream:
    """Push ``ids`` one by one; at each step the stream's text is ``decode`` of them all, and
    (unless the decoder rewrites text already handed out) the deltas add up to it."""
    stream = TextStream(decode=decode, stops=stops)
    deltas = []
    for n, token in enumerate(ids, 1):
        deltas.append(stream.push(token))
        if stream.stopped:
            break
        expected = decode(ids[:n])
        if not expected.endswith(REPLACEMENT):
            assert stream.text == expected, n
    tail = stream.flush()
    if not stream.stopped and deltas_add_up:
        assert "".join(deltas) + tail == decode(ids).rstrip(REPLACEMENT)
    return stream


@pytest.fixture(scope="module")
def smollm_tokenizer(model_dir: Path):  # noqa: ANN201
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


@pytest.mark.parametrize("text", TEXTS)
def test_real_tokenizer_texts_decode_as_a_whole(smollm_tokenizer, text):  # noqa: ANN001
    def decode(ids: list[int]) -> str:
        return smollm_tokenizer.decode(ids, skip_special_tokens=True)

    ids = smollm_tokenizer.encode(text * 3)
    check_stream(decode, ids)


def test_real_tokenizer_random_ids_and_special_tokens(smollm_tokenizer):  # noqa: ANN001
    # random ids split characters anywhere and mix in special tokens (decoded as nothing)
    def decode(ids: list[int]) -> str:
        return smollm_tokenizer.decode(ids, skip_special_tokens=True)

    rng = random.Random(7)
    vocab = len(smollm_tokenizer)
    byte_ids = smollm_tokenizer.encode("한빛 로보틱스 😀")
    for _ in range(6):
        ids = [
            rng.choice(byte_ids) if rng.random() < 0.4 else rng.randrange(vocab) for _ in range(120)
        ]
        check_stream(decode, ids)


def test_real_tokenizer_stop_string_found_across_settled_text(smollm_tokenizer):  # noqa: ANN001
    def decode(ids: list[int]) -> str:
        return smollm_tokenizer.decode(ids, skip_special_tokens=True)

    text = TEXTS[0] * 4 + "\n\n질문: 다음 " + TEXTS[1]
    stream = check_stream(decode, smollm_tokenizer.encode(text), stops=("\n\n질문:",))
    assert stream.stopped and stream.text == TEXTS[0] * 4


def test_sentencepiece_style_leading_spaces_are_kept():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>"])
    tokenizer.train_from_iterator(TEXTS * 5, trainer=trainer)

    def decode(ids: list[int]) -> str:
        return tokenizer.decode(ids)

    pair = tokenizer.encode("a b").ids
    assert (decode(pair), decode(pair[1:])) == ("a b", "b")  # a lone word loses its space
    for text in TEXTS:
        check_stream(decode, tokenizer.encode(text + " " + text).ids)


def test_a_clean_up_rule_across_the_boundary_falls_back_to_decoding_everything():
    # like clean_up_tokenization_spaces: " ." becomes "." once the dot arrives
    def decode(ids: list[int]) -> str:
        return bytes(ids).decode("utf-8", errors="replace").replace(" .", ".")

    text = "one two three four five six seven eight nine ten .  and more words here ."
    # the space before a dot was handed out before the dot came (as when decoding every id)
    stream = check_stream(decode, list(text.encode()), deltas_add_up=False)
    assert stream.text == decode(list(text.encode()))


def test_a_token_decodes_a_bounded_window():
    decoded = []

    def decode(ids: list[int]) -> str:
        decoded.append(len(ids))
        return bytes(ids).decode("utf-8", errors="replace")

    stream = TextStream(decode=decode)
    data = ("가나다 abc " * 400).encode()
    for token in data:
        stream.push(token)
    assert stream.flush() == "" and stream.text == data.decode()
    assert max(decoded) <= 2 * SETTLE_EVERY + 3  # settling waits out a split character
    assert sum(decoded) < 3 * SETTLE_EVERY * len(data)
