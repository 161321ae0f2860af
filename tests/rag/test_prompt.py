"""Tests for rag.prompt: conversation numbering and prefix-stable prompt rendering."""

from __future__ import annotations

from dataclasses import replace

from rag.prompt import (
    Citation,
    build_messages,
    chunk_header,
    number_chunks,
    render_chunk,
    render_user_turn,
)
from rag.types import RetrievedChunk


def chunk(chunk_id: int, **kw) -> RetrievedChunk:
    fields = {
        "chunk_id": chunk_id,
        "document_id": 100 + chunk_id // 10,
        "title": f"Doc {chunk_id // 10}",
        "section": f"Section {chunk_id}",
        "page": None,
        "text": f"Body text of chunk {chunk_id}.",
        "source": f"doc-{chunk_id // 10}.md",
        "score": 0.5,
    }
    fields.update(kw)
    return RetrievedChunk(**fields)


# --- number_chunks ----------------------------------------------------------------------


def test_number_chunks_fresh_conversation():
    retrieved = [chunk(11), chunk(12), chunk(23)]
    new, citations = number_chunks(retrieved, {})
    assert [(n, c.chunk_id) for n, c in new] == [(1, 11), (2, 12), (3, 23)]
    assert [c.number for c in citations] == [1, 2, 3]
    assert [c.chunk_id for c in citations] == [11, 12, 23]


def test_number_chunks_reuses_known_and_numbers_new_after_known():
    known = {10: 1, 11: 2, 30: 3}
    retrieved = [chunk(11), chunk(12), chunk(10), chunk(13)]
    new, citations = number_chunks(retrieved, known)
    # only unseen chunks are rendered again, numbered after the highest known number
    assert [(n, c.chunk_id) for n, c in new] == [(4, 12), (5, 13)]
    # citations cover every retrieved chunk, in retrieval order
    assert [(c.number, c.chunk_id) for c in citations] == [(2, 11), (4, 12), (1, 10), (5, 13)]
    assert known == {10: 1, 11: 2, 30: 3}  # not mutated


def test_number_chunks_numbers_in_prompt_order_and_cites_in_relevance_order():
    relevance = [chunk(11), chunk(12), chunk(23), chunk(5)]
    ordered = [chunk(23), chunk(11), chunk(12)]  # the ordering's layout; 5 is already known
    new, citations = number_chunks(ordered, {5: 1}, relevance=relevance)
    # numbers follow the prompt, so [2] is the first new document the model reads
    assert [(n, c.chunk_id) for n, c in new] == [(2, 23), (3, 11), (4, 12)]
    # the citations (and the relevance hint built from them) keep the retriever's ranking
    assert [(c.number, c.chunk_id) for c in citations] == [(3, 11), (4, 12), (2, 23), (1, 5)]


def test_number_chunks_continues_after_highest_known_number():
    new, citations = number_chunks([chunk(1), chunk(2)], {99: 7, 98: 2})
    assert [n for n, _ in new] == [8, 9]
    assert [c.number for c in citations] == [8, 9]


def test_number_chunks_all_known_renders_nothing_new():
    new, citations = number_chunks([chunk(5), chunk(6)], {5: 2, 6: 1})
    assert new == []
    assert [c.number for c in citations] == [2, 1]


def test_citation_carries_chunk_fields():
    c = chunk(42, page=7, source="policy.md", text="  Text with spaces.  ")
    _, [citation] = number_chunks([c], {})
    assert citation == Citation(
        number=1,
        chunk_id=42,
        document_id=c.document_id,
        title=c.title,
        section=c.section,
        page=7,
        source="policy.md",
        text="  Text with spaces.  ",
    )


# --- rendering --------------------------------------------------------------------------


def test_chunk_header_variants():
    assert chunk_header("Leave Policy", "Annual leave", None) == "Leave Policy > Annual leave"
    assert chunk_header("Leave Policy", "", None) == "Leave Policy"
    assert chunk_header("Leave Policy", "Annual leave", 3) == "Leave Policy > Annual leave (p. 3)"
    assert chunk_header("Leave Policy", "", 0) == "Leave Policy (p. 0)"


def test_render_chunk_header_and_body():
    c = chunk(3, title="VPN Access", section="Installing", text="\n  Download the client.  \n")
    rendered = render_chunk(4, c)
    assert rendered == "[4] VPN Access > Installing\nDownload the client."


def test_render_chunk_is_byte_identical_across_calls():
    c = chunk(3, title="원격 근무", section="신청 방법", page=2, text="신청은 포털에서 합니다.")
    first = render_chunk(1, c)
    copy = RetrievedChunk(**{f: getattr(c, f) for f in c.__dataclass_fields__})
    assert [render_chunk(1, c).encode() for _ in range(3)] == [first.encode()] * 3
    assert render_chunk(1, copy).encode() == first.encode()
    assert first.splitlines()[0] == "[1] 원격 근무 > 신청 방법 (p. 2)"


def test_render_does_not_depend_on_score():
    a = chunk(7, score=0.91)
    b = replace(a, score=0.12)
    assert a != b
    assert render_chunk(1, a) == render_chunk(1, b)
    assert "0.91" not in render_chunk(1, a)
    new_a, cit_a = number_chunks([a], {})
    new_b, cit_b = number_chunks([b], {})
    assert cit_a == cit_b
    turn_a = render_user_turn("What is it?", new_a, cit_a)
    assert turn_a == render_user_turn("What is it?", new_b, cit_b)
    assert "0.91" not in turn_a


def test_user_turn_order_documents_hint_question():
    retrieved = [chunk(11), chunk(12)]
    new, citations = number_chunks(retrieved, {})
    turn = render_user_turn("  How do I reset my password?  ", new, citations)
    docs = turn.index("Documents:")
    first = turn.index("[1] Doc 1 > Section 11")
    second = turn.index("[2] Doc 1 > Section 12")
    hint = turn.index("Most relevant documents: [1], [2]")
    question = turn.index("Question: How do I reset my password?")
    assert docs < first < second < hint < question
    assert turn.startswith("Documents:\n\n[1] ")
    assert turn.endswith("Question: How do I reset my password?")
    assert render_chunk(1, retrieved[0]) in turn
    assert render_chunk(2, retrieved[1]) in turn


def test_user_turn_only_renders_new_chunks_but_hints_all():
    known = {11: 1}
    new, citations = number_chunks([chunk(12), chunk(11)], known)
    turn = render_user_turn("Next?", new, citations)
    assert "[2] Doc 1 > Section 12" in turn
    assert "Section 11" not in turn  # already in the conversation: not repeated
    assert "Most relevant documents: [2], [1]" in turn


def test_user_turn_without_documents():
    assert render_user_turn("Hello?", [], []) == "Question: Hello?"
    new, citations = number_chunks([chunk(1)], {1: 1})
    turn = render_user_turn("Again?", new, citations)
    assert "Documents:" not in turn
    assert turn == "Most relevant documents: [1]\n\nQuestion: Again?"


# --- messages ---------------------------------------------------------------------------


def test_build_messages_system_first_history_verbatim():
    history = [
        ("user", "Documents:\n\n[1] A > B\ntext\n\nQuestion: first?  "),
        ("assistant", "  Answer [1].\n"),
        ("user", "Question: second?"),
        ("assistant", "Second answer."),
    ]
    messages = build_messages("SYSTEM PROMPT", history, "Question: third?")
    assert messages[0] == ("system", "SYSTEM PROMPT")
    assert list(messages[1:-1]) == history  # byte-for-byte, whitespace included
    assert messages[-1] == ("user", "Question: third?")
    assert len(messages) == len(history) + 2


def test_build_messages_is_prefix_stable_across_turns():
    system = "sys"
    turn1 = build_messages(system, [], "Question: one?")
    history = [*turn1[1:], ("assistant", "One.")]
    turn2 = build_messages(system, history, "Question: two?")
    assert turn2[: len(turn1)] == turn1
    assert turn2[len(turn1)] == ("assistant", "One.")


def test_build_messages_without_history():
    assert build_messages("s", [], "u") == (("system", "s"), ("user", "u"))
