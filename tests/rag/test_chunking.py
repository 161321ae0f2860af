"""Tests for rag.chunking.chunk_sections with simple word and character token counters."""

from __future__ import annotations

import statistics

import pytest

from rag.chunking import chunk_sections
from rag.types import ChunkDraft, Section


def words(text: str) -> int:
    return len(text.split())


def chars(text: str) -> int:
    return len(text)


def _word(i: int) -> str:
    """A unique, letter-only word (so a following '.' always ends a sentence)."""
    out = ""
    i += 26 * 26  # at least three letters
    while i:
        i, r = divmod(i, 26)
        out = chr(ord("a") + r) + out
    return out


def _sentences(n_sentences: int, words_per_sentence: int, start: int = 0) -> tuple[str, list[str]]:
    """Sentences of unique words; returns the text and the words in order (without dots)."""
    vocab: list[str] = []
    sentences = []
    idx = start
    for _ in range(n_sentences):
        ws = [_word(idx + j) for j in range(words_per_sentence)]
        idx += words_per_sentence
        vocab.extend(ws)
        sentences.append(" ".join(ws).capitalize() + ".")
    return " ".join(sentences), vocab


def _plain(text: str) -> list[str]:
    return [w.strip(".").lower() for w in text.split()]


def _overlap_len(a: list[str], b: list[str]) -> int:
    """Length of the longest suffix of ``a`` that is a prefix of ``b``."""
    for n in range(min(len(a), len(b)), 0, -1):
        if a[-n:] == b[:n]:
            return n
    return 0


def _assert_covers_in_order(chunks: list[ChunkDraft], vocab: list[str]) -> None:
    """Each chunk is a contiguous run of ``vocab``; together they cover it without gaps."""
    position = {w: i for i, w in enumerate(vocab)}
    assert len(position) == len(vocab), "test vocabulary must be unique"
    prev_start, prev_end = -1, -1
    for chunk in chunks:
        ws = _plain(chunk.text)
        assert ws, "empty chunk"
        start = position[ws[0]]
        assert ws == vocab[start : start + len(ws)], (
            f"chunk is not a contiguous run: {chunk.text!r}"
        )
        assert start > prev_start, "chunks must advance"
        assert start <= prev_end + 1, f"words lost between chunks before {ws[0]!r}"
        prev_start, prev_end = start, start + len(ws) - 1
    assert chunks[0].text.split()[0].strip(".").lower() == vocab[0]
    assert prev_end == len(vocab) - 1, "words lost at the end"


# --- the token budget -------------------------------------------------------------------


@pytest.mark.parametrize("max_tokens,overlap", [(12, 0), (12, 5), (20, 8), (7, 3), (50, 10)])
def test_word_counter_chunks_fit_budget(max_tokens, overlap):
    para1, _ = _sentences(8, 4)
    para2, _ = _sentences(5, 9, start=100)
    lines = "\n".join(f"{i}. " + _sentences(1, 3, start=200 + 10 * i)[0] for i in range(1, 8))
    text = f"{para1}\n\n{para2}\n\n{lines}"
    chunks = chunk_sections([Section("Budget", text)], words, max_tokens, overlap)
    assert len(chunks) > 1
    for chunk in chunks:
        assert chunk.token_count == words(chunk.text)
        assert 0 < chunk.token_count <= max_tokens, chunk.text


def test_char_counter_chunks_fit_budget_within_a_paragraph():
    # one paragraph: every separator is a single character, which the chunker budgets for
    text, vocab = _sentences(30, 5)
    chunks = chunk_sections([Section("Chars", text)], chars, 80, 20)
    assert len(chunks) > 3
    for chunk in chunks:
        assert chunk.token_count == len(chunk.text)
        assert chunk.token_count <= 80, chunk.text
    _assert_covers_in_order(chunks, vocab)


def test_char_counter_long_word_run_split():
    text = " ".join(_word(i) for i in range(200))  # no punctuation at all
    chunks = chunk_sections([Section("", text)], chars, 40, 0)
    assert all(c.token_count <= 40 for c in chunks)
    assert " ".join(c.text for c in chunks) == text


# --- overlap ----------------------------------------------------------------------------


def test_consecutive_chunks_overlap():
    text, vocab = _sentences(20, 4)
    chunks = chunk_sections([Section("S", text)], words, 20, 8)
    assert len(chunks) >= 4
    for a, b in zip(chunks, chunks[1:], strict=False):
        wa, wb = a.text.split(), b.text.split()
        n = _overlap_len(wa, wb)
        assert n > 0, f"no overlap between {a.text!r} and {b.text!r}"
        assert n <= 8
        # the overlap is whole units (sentences), so the next chunk starts a sentence
        assert b.text[0].isupper()
        assert a.text.endswith(" ".join(wb[:n]))
    _assert_covers_in_order(chunks, vocab)


def test_no_overlap_when_zero():
    text, vocab = _sentences(20, 4)
    chunks = chunk_sections([Section("S", text)], words, 20, 0)
    assert len(chunks) >= 4
    all_words = [w for c in chunks for w in _plain(c.text)]
    assert all_words == vocab  # every word exactly once, in order
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert _overlap_len(a.text.split(), b.text.split()) == 0


def test_overlap_never_reaches_whole_previous_chunk():
    text, _ = _sentences(12, 3)
    chunks = chunk_sections([Section("S", text)], words, 9, 8)
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert a.text != b.text
        assert not a.text.startswith(b.text)
        assert _overlap_len(a.text.split(), b.text.split()) < len(a.text.split())


# --- sections ---------------------------------------------------------------------------


def test_chunks_never_cross_sections():
    text_a, vocab_a = _sentences(10, 4)
    text_b, vocab_b = _sentences(10, 4, start=500)
    sections = [Section("Alpha", text_a, page=1), Section("Beta", text_b, page=2)]
    chunks = chunk_sections(sections, words, 15, 4)
    alpha = [c for c in chunks if c.section == "Alpha"]
    beta = [c for c in chunks if c.section == "Beta"]
    assert alpha and beta
    assert chunks == alpha + beta  # section order kept
    assert {c.page for c in alpha} == {1}
    assert {c.page for c in beta} == {2}
    for c in alpha:
        assert set(_plain(c.text)) <= set(vocab_a)
    for c in beta:
        assert set(_plain(c.text)) <= set(vocab_b)
    _assert_covers_in_order(alpha, vocab_a)
    _assert_covers_in_order(beta, vocab_b)


def test_ordinals_are_consecutive_across_sections():
    sections = [Section(f"H{i}", _sentences(6, 5, start=100 * i)[0]) for i in range(3)]
    chunks = chunk_sections(sections, words, 12, 3)
    assert len(chunks) > 3
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))


@pytest.mark.parametrize("body", ["", "   ", "\n\n  \n", " \t \n"])
def test_empty_sections_produce_no_chunks(body):
    assert chunk_sections([Section("Empty", body)], words, 20, 5) == []


def test_empty_sections_between_others_are_skipped():
    sections = [Section("A", "one two three."), Section("B", "  \n "), Section("C", "four five.")]
    chunks = chunk_sections(sections, words, 20, 5)
    assert [(c.ordinal, c.section, c.text) for c in chunks] == [
        (0, "A", "one two three."),
        (1, "C", "four five."),
    ]


def test_short_section_is_one_chunk_verbatim():
    text = "First paragraph here.\n\nSecond one,\nwith a line break."
    chunks = chunk_sections([Section("Intro", text, page=3)], words, 100, 10)
    assert len(chunks) == 1
    assert chunks[0].text == text
    assert chunks[0].section == "Intro"
    assert chunks[0].page == 3
    assert chunks[0].token_count == words(text)


# --- splitting rules --------------------------------------------------------------------


def test_numbered_list_items_are_not_split_at_the_number():
    text = (
        "To reset a password follow the steps below carefully.\n"
        "1. Open the self service portal in a browser.\n"
        "2. Choose the forgotten password link on the page.\n"
        "3. Enter your employee number and your email.\n"
        "4. Wait for the one time code to arrive.\n"
        "5. Type the code shown on the screen. Then press the green button to confirm."
    )
    chunks = chunk_sections([Section("Reset", text)], words, 12, 0)
    texts = [c.text for c in chunks]
    assert all(c.token_count <= 12 for c in chunks)
    for n in range(1, 6):
        assert f"{n}." not in texts, f"list number {n}. split off on its own"
    assert any(t.startswith("5. Type the code shown on the screen.") for t in texts), texts
    assert any(t.startswith("1. Open the self service portal") for t in texts), texts
    assert [w for t in texts for w in t.split()] == text.split()


def test_decimal_numbers_are_not_sentence_ends():
    text = "Version 3.5 is required for the client to work. " * 6
    chunks = chunk_sections([Section("V", text.strip())], words, 12, 0)
    assert all("3.5" in c.text for c in chunks)
    assert all(c.text.endswith("work.") for c in chunks)


def test_single_huge_sentence_is_split_into_word_runs():
    vocab = [_word(i) for i in range(137)]
    text = " ".join(vocab)  # one sentence, no punctuation, no line breaks
    chunks = chunk_sections([Section("Run", text)], words, 10, 0)
    assert len(chunks) == 14
    assert all(1 <= c.token_count <= 10 for c in chunks)
    assert [w for c in chunks for w in c.text.split()] == vocab


def test_huge_sentence_with_overlap_keeps_all_words():
    vocab = [_word(i) for i in range(90)]
    chunks = chunk_sections([Section("Run", " ".join(vocab))], words, 10, 4)
    assert all(c.token_count <= 10 for c in chunks)
    _assert_covers_in_order(chunks, vocab)


def test_all_words_preserved_in_order_mixed_structure():
    para1, v1 = _sentences(7, 6)
    para2, v2 = _sentences(3, 25, start=300)  # sentences longer than the budget
    lines = "\n".join(_sentences(1, 5, start=600 + 5 * i)[0] for i in range(6))
    v3 = [w for i in range(6) for w in _sentences(1, 5, start=600 + 5 * i)[1]]
    text = f"{para1}\n\n{para2}\n\n{lines}"
    for overlap in (0, 4):
        chunks = chunk_sections([Section("Mixed", text)], words, 16, overlap)
        assert all(c.token_count <= 16 for c in chunks)
        _assert_covers_in_order(chunks, v1 + v2 + v3)


def test_chunk_keeps_original_separators():
    text = "Alpha beta gamma.\n\nDelta epsilon.\nZeta eta theta."
    chunks = chunk_sections([Section("S", text)], words, 6, 0)
    # the paragraph break ends a chunk; the single line break inside a chunk is kept
    assert [c.text for c in chunks] == ["Alpha beta gamma.", "Delta epsilon.\nZeta eta theta."]


# --- Korean -----------------------------------------------------------------------------


KOREAN = (
    "신규 입사자는 첫날 오전 아홉 시 삼십 분까지 본사 로비로 와 주세요. "
    "보안데스크에서 신분증을 보여 주시면 임시 출입증을 받을 수 있습니다. "
    "인사팀 담당자가 로비로 직접 마중을 나갑니다. "
    "오전에는 사진 촬영 후 정식 사원증을 발급받습니다. "
    "사원증은 출입 카드이자 보안 프린터 출력 카드입니다. "
    "건물 안에서는 항상 잘 보이게 착용해야 합니다."
)


def test_korean_text_with_word_counter():
    chunks = chunk_sections([Section("입사 첫날", KOREAN)], words, 12, 4)
    assert len(chunks) > 1
    assert all(c.section == "입사 첫날" for c in chunks)
    assert all(c.token_count <= 12 for c in chunks)
    # sentences end at "다." / "요." and each chunk starts with a sentence
    starts = {s.split()[0] for s in KOREAN.split(". ")}
    assert all(c.text.split()[0] in starts for c in chunks)
    no_overlap = chunk_sections([Section("입사 첫날", KOREAN)], words, 12, 0)
    assert " ".join(c.text for c in no_overlap) == KOREAN


def test_korean_text_with_char_counter():
    chunks = chunk_sections([Section("입사 첫날", KOREAN)], chars, 60, 0)
    assert len(chunks) > 2
    assert all(c.token_count == len(c.text) <= 60 for c in chunks)
    assert " ".join(c.text for c in chunks) == KOREAN


# --- chunk_document: budgets in characters per language, floor merge (issue #31 item 4) --------

from rag.chunk_budget import ChunkBudget, LanguageBudget, scaled  # noqa: E402
from rag.chunking import chunk_document  # noqa: E402

ENGLISH_TEXT = " ".join(
    f"Step {i}: open the settings page and check that the service account has access."
    for i in range(40)
)
KOREAN_TEXT = " ".join(
    f"{i}단계: 설정 페이지를 열고 서비스 계정에 접근 권한이 있는지 확인합니다." for i in range(40)
)


def test_korean_budget_is_the_english_one_scaled() -> None:
    budget = ChunkBudget()
    assert budget.for_text(KOREAN_TEXT) is budget.hangul
    assert budget.for_text(ENGLISH_TEXT) is budget.latin
    assert budget.hangul.max_chars == round(0.58 * budget.latin.max_chars)
    assert scaled(LanguageBudget(1000, 100, 100), 0.5) == LanguageBudget(500, 50, 50)


def test_korean_and_english_chunks_hold_similar_text_not_similar_tokens() -> None:
    """A Korean chunk holds the same steps as an English one, whatever the LLM's tokenizer
    spends on Hangul (here 3 'tokens' a syllable, as the small model's does)."""

    def llm_tokens(text: str) -> int:
        return sum(3 if "\uac00" <= ch <= "\ud7a3" else 1 for ch in text) // 4

    en = chunk_document([Section("en", ENGLISH_TEXT)], llm_tokens)
    ko = chunk_document([Section("ko", KOREAN_TEXT)], llm_tokens)
    steps = lambda cs: statistics.mean(c.text.count(":") for c in cs[:-1])  # noqa: E731
    assert len(en) > 2 and len(ko) > 2
    assert abs(steps(en) - steps(ko)) <= 0.35 * steps(en)  # about as many steps per chunk
    assert all(len(c.text) <= ChunkBudget().latin.max_chars for c in en)
    assert all(len(c.text) <= ChunkBudget().hangul.max_chars for c in ko)
    assert all(c.token_count == llm_tokens(c.text) for c in en + ko)


def test_a_small_section_joins_the_next_chunk_with_its_heading() -> None:
    sections = [
        Section("ecpg", "ecpg — embedded SQL C preprocessor"),
        Section("Description", "ecpg is the embedded SQL preprocessor for C programs. " * 6),
    ]
    chunks = chunk_document(sections, words)
    assert len(chunks) == 1
    assert chunks[0].section == "Description"
    assert chunks[0].text.startswith("ecpg\necpg — embedded SQL C preprocessor\necpg is")


def test_a_small_last_chunk_joins_the_previous_one() -> None:
    body = "The archive command copies each WAL segment to the archive location. " * 3
    sections = [Section("Archiving", body.strip()), Section("See Also", "pg_basebackup")]
    chunks = chunk_document(sections, words)
    assert len(chunks) == 1
    assert chunks[0].section == "Archiving"
    assert chunks[0].text.endswith("\nSee Also\npg_basebackup")


def test_a_small_tail_does_not_repeat_its_overlap() -> None:
    budget = ChunkBudget(LanguageBudget(100, 40, 30), LanguageBudget(60, 20, 20))
    text, vocab = _sentences(7, 3)  # the last chunk would be overlap plus a short tail
    chunks = chunk_document([Section("S", text)], words, budget)
    assert all(len(c.text) >= 30 for c in chunks)
    _assert_covers_in_order(chunks, vocab)
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))


def test_a_one_line_document_stays_one_small_chunk() -> None:
    chunks = chunk_document([Section("", "Short note.")], words)
    assert [(c.text, c.token_count) for c in chunks] == [("Short note.", 2)]
