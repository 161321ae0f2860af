"""A turn's prompt layout (``rag.layout``): append and re-lay, the numbering a conversation keeps
whichever is sent, the shadow keys of each, and the choice between them."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import pytest
from test_ordering import chunk

from rag.layout import (
    ADAPTIVE,
    APPEND,
    RELAY,
    Conversation,
    Layout,
    SentTurn,
    append_layout,
    block_key,
    rebuild,
    relay_layout,
)
from rag.layout_choice import choose, lay_out
from rag.prompt_keys import answer_key, tail_key
from rag.types import RetrievedChunk

SYSTEM = "You answer from the documents."


def as_given(
    chunks: Sequence[RetrievedChunk],
    prefix: Sequence[Hashable],
    candidates: Sequence[RetrievedChunk],
    tally: bool,
) -> list[RetrievedChunk]:
    return list(chunks)


def reverse(
    chunks: Sequence[RetrievedChunk],
    prefix: Sequence[Hashable],
    candidates: Sequence[RetrievedChunk],
    tally: bool,
) -> list[RetrievedChunk]:
    return list(reversed(chunks))


def test_append_continues_from_what_was_sent_and_keeps_numbers() -> None:
    conv = Conversation.start(SYSTEM)
    first = append_layout(conv, "Q1?", [chunk(10), chunk(11)], as_given)
    assert first.kind == APPEND and first.messages[0] == ("system", SYSTEM)
    assert first.prefix == (conv.system_key,) and first.chunk_keys == (10, 11)
    assert first.messages[-1][1].startswith("Documents:\n\n[1] Doc 10")
    conv.record(first, "A1 [1]")
    assert conv.keys == (*first.keys, answer_key("A1 [1]")) and conv.numbers == {10: 1, 11: 2}

    second = append_layout(conv, "Q2?", [chunk(11), chunk(12)], as_given)
    assert second.messages[: len(conv.sent)] == conv.sent  # the last prompt, byte for byte
    assert second.prefix == conv.keys and second.chunk_keys == (12,)  # only what is new
    assert [(n, c.chunk_id) for n, c in second.new_chunks] == [(3, 12)]
    assert [(c.number, c.chunk_id) for c in second.citations] == [(2, 11), (3, 12)]
    assert "Most relevant documents: [2], [3]" in second.short and "Q2?" in second.short


def test_relay_sends_every_retrieved_chunk_first_under_the_conversations_numbers() -> None:
    conv = Conversation.start(SYSTEM)
    conv.record(append_layout(conv, "Q1?", [chunk(10), chunk(11)], as_given), "A1 [1]")
    conv.record(append_layout(conv, "Q2?", [chunk(12)], as_given), "A2 [3]")
    relaid = relay_layout(conv, "Q3?", [chunk(11), chunk(13)], reverse)
    system, docs, *history, last = relaid.messages
    assert system == ("system", SYSTEM) and docs[0] == "user"
    # the block: 13 (new: number 4) then 11 (its number 2); old documents (10, 12) left out
    assert docs[1].startswith("Documents:\n\n[4] Doc 13") and "[2] Doc 11" in docs[1]
    assert "Doc 10" not in "".join(t for _r, t in relaid.messages)
    assert [m[1] for m in history] == [conv.turns[0].short, "A1 [1]", conv.turns[1].short, "A2 [3]"]
    assert last == ("user", relaid.short) and "Question: Q3?" in relaid.short
    # keys: the block after the system prompt, number-qualified where number != position
    # (13 is [4] at position 1; 11 is [2] at position 2, as a first turn would render it)
    assert relaid.prefix == (conv.system_key,)
    assert relaid.chunk_keys == ((13, 4), 11)
    assert relaid.after == (
        tail_key(conv.turns[0].short),
        answer_key("A1 [1]"),
        tail_key(conv.turns[1].short),
        answer_key("A2 [3]"),
    )
    assert relaid.present == {11, 13}
    conv.record(relaid, "A3 [4]")
    # a chunk the re-lay left out comes back under its old number when appended again
    again = append_layout(conv, "Q4?", [chunk(10), chunk(14)], as_given)
    assert [(n, c.chunk_id) for n, c in again.new_chunks] == [(1, 10), (5, 14)]
    assert again.messages[: len(conv.sent)] == conv.sent


def test_a_block_chunk_is_keyed_by_id_only_where_its_number_is_its_position() -> None:
    assert block_key(7, 1, 1) == 7 and block_key(7, 3, 1) == (7, 3)
    # a first turn's chunks are numbered in prompt order: plain ids, shared with other sessions
    conv = Conversation.start(SYSTEM)
    first = lay_out(ADAPTIVE, conv, "Q?", [chunk(5), chunk(6)], as_given, len_of, nothing)[0]
    assert first.kind == APPEND and first.chunk_keys == (5, 6)


def len_of(layout: Layout) -> int:
    return sum(len(text) for _r, text in layout.messages)


def nothing(layout: Layout) -> int:
    return 0


def test_choose_takes_the_fewest_uncached_tokens_and_never_more_prompt_than_append() -> None:
    conv = Conversation.start(SYSTEM)
    conv.record(append_layout(conv, "Q1?", [chunk(10), chunk(11)], as_given), "A1")
    append = append_layout(conv, "Q2?", [chunk(12)], as_given)
    relay = relay_layout(conv, "Q2?", [chunk(12)], as_given)
    tokens = {APPEND: 1000, RELAY: 600}
    held = {APPEND: 900, RELAY: 0}
    picked, scored = choose([append, relay], lambda x: tokens[x.kind], lambda x: held[x.kind])
    assert picked.kind == APPEND and scored == {APPEND: (1000, 900), RELAY: (600, 0)}
    held[APPEND] = 100  # the history was evicted: re-lay sends 600 uncached, append 900
    assert choose([append, relay], lambda x: tokens[x.kind], lambda x: held[x.kind])[0] is relay
    held[APPEND] = 400  # a tie on uncached tokens: the shorter prompt
    assert choose([append, relay], lambda x: tokens[x.kind], lambda x: held[x.kind])[0] is relay
    tokens[RELAY], held[RELAY] = 1001, 1001  # longer than append: never taken
    assert choose([append, relay], lambda x: tokens[x.kind], lambda x: held[x.kind])[0] is append
    with pytest.raises(ValueError):
        choose([], len_of, nothing)
    with pytest.raises(ValueError):
        lay_out("sideways", conv, "Q?", [], as_given, len_of, nothing)
    # adaptive weighs both; the fixed layouts send theirs
    assert lay_out(RELAY, conv, "Q?", [chunk(1)], as_given, len_of, nothing)[0].kind == RELAY
    both = lay_out(ADAPTIVE, conv, "Q?", [chunk(1)], as_given, len_of, nothing)[1]
    assert set(both) == {APPEND, RELAY}


def test_a_stored_conversation_rebuilds_every_prompt_exactly_as_it_was_sent() -> None:
    live = Conversation.start(SYSTEM)
    sent: list[tuple[SentTurn, str]] = []
    plan = [
        (append_layout, [chunk(10), chunk(11)]),
        (relay_layout, [chunk(11), chunk(12)]),
        (append_layout, [chunk(10), chunk(13)]),  # 10: left out by the re-lay, back as [2]
        (relay_layout, [chunk(14)]),
        (relay_layout, []),  # nothing retrieved: no document block
        (append_layout, [chunk(12)]),
    ]
    for i, (build, retrieved) in enumerate(plan):
        layout = build(live, f"Q{i}?", retrieved, reverse)
        # the turn rebuilt from what is stored of the turns before it is the turn sent
        resumed = Conversation.resume(SYSTEM, sent)
        assert (resumed.sent, resumed.keys, resumed.present) == (live.sent, live.keys, live.present)
        assert resumed.numbers == live.numbers and resumed.turns == live.turns
        again = rebuild(resumed, layout.sent)
        assert again.messages == layout.messages and again.keys == layout.keys
        assert (again.block, again.present, again.short) == (
            layout.block,
            layout.present,
            layout.short,
        )
        answer = f"A{i} [{layout.block[0][1] if layout.block else 1}]"
        live.record(layout, answer)
        sent.append((layout.sent, answer))
    assert [t.kind for t, _a in sent] == [APPEND, RELAY, APPEND, RELAY, RELAY, APPEND]
    assert live.numbers == {11: 1, 10: 2, 12: 3, 13: 4, 14: 5}  # reversed: 11 first
    with pytest.raises(ValueError):
        rebuild(live, SentTurn("sideways", "Q?", "Q?"))


def test_resume_keeps_the_last_turns_in_the_prompt_and_every_number() -> None:
    conv = Conversation.start(SYSTEM)
    sent: list[tuple[SentTurn, str]] = []
    for i, retrieved in enumerate(([chunk(10), chunk(11)], [chunk(12)], [chunk(13)])):
        layout = append_layout(conv, f"Q{i}?", retrieved, as_given)
        conv.record(layout, f"A{i}")
        sent.append((layout.sent, f"A{i}"))
    cut = Conversation.resume(SYSTEM, sent, keep=2)
    # the first turn left the prompt: its chunks are no longer present, their numbers stay
    assert cut.present == {12, 13} and cut.numbers == conv.numbers
    assert [m[1] for m in cut.sent[1:]] == [sent[1][0].user, "A1", sent[2][0].user, "A2"]
    # the second turn now follows the system prompt: its chunk [3] sits at position 1, so it
    # is keyed by number (other tokens than a first turn's [1])
    assert cut.keys[1] == (12, 3)
    again = append_layout(cut, "Q3?", [chunk(10), chunk(14)], as_given)
    assert [(n, c.chunk_id) for n, c in again.new_chunks] == [(1, 10), (5, 14)]
    assert Conversation.resume(SYSTEM, sent, keep=0).sent == ()
    assert Conversation.resume(SYSTEM, sent, keep=0).next_number == 5


def test_resume_leaves_out_the_turns_it_is_told_to_and_keeps_their_numbers() -> None:
    """A turn left out (its documents no longer the reader's) sends nothing, wherever it is:
    not its documents, question or answer; the turns after it are laid after the turns kept,
    and its chunks keep their numbers (one retrieved again is rendered again, as [2])."""
    conv = Conversation.start(SYSTEM)
    sent: list[tuple[SentTurn, str]] = []
    for i, retrieved in enumerate(([chunk(10)], [chunk(11)], [chunk(12)])):
        layout = (append_layout if i != 2 else relay_layout)(conv, f"Q{i}?", retrieved, as_given)
        conv.record(layout, f"A{i} secret" if i == 1 else f"A{i}")
        sent.append((layout.sent, f"A{i} secret" if i == 1 else f"A{i}"))
    assert "Doc 11" in "\n".join(m[1] for m in Conversation.resume(SYSTEM, sent[:2]).sent)
    out = Conversation.resume(SYSTEM, sent, left_out={1})
    text = "\n".join(m[1] for m in out.sent)
    assert "Doc 11" not in text and "Q1?" not in text and "secret" not in text
    assert out.numbers == conv.numbers == {10: 1, 11: 2, 12: 3}
    assert [t.answer for t in out.turns] == ["A0", "A2"]
    again = append_layout(out, "Q3?", [chunk(11)], as_given)
    assert [(n, c.chunk_id) for n, c in again.new_chunks] == [(2, 11)]
    # left out and kept together: the oldest turn out by ``keep``, the middle one by name
    assert [t.answer for t in Conversation.resume(SYSTEM, sent, 2, {1}).turns] == ["A2"]
