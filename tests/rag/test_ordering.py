"""Ordering strategies: our ``prefix`` strategy's properties, the facade, the ContextPilot
adapter (when installed), and the relevance hint in the rendered turn."""

from __future__ import annotations

import pytest

from rag.ordering import OrderingError, default_ordering, riders_in
from rag.ordering.base import ContextOrdering, relevance_order
from rag.ordering.contextpilot_adapter import available as contextpilot_available
from rag.ordering.prefix import PrefixOrdering, chunk_weight
from rag.prompt import number_chunks, render_user_turn
from rag.types import RetrievedChunk

PREFIX = ("system:0123456789abcdef",)


def chunk(cid: int, tokens: int = 100, doc: int | None = None) -> RetrievedChunk:
    return RetrievedChunk(
        chunk_id=cid,
        document_id=doc if doc is not None else cid,
        title=f"Doc {cid}",
        section="",
        page=None,
        text=f"text of chunk {cid} " * 10,
        source=f"doc{cid}.md",
        score=1.0,
        token_count=tokens,
    )


def ids(chunks: list[RetrievedChunk]) -> list[int]:
    return [c.chunk_id for c in chunks]


def send(ordering: ContextOrdering, strategy: str, chunks: list[RetrievedChunk]) -> list[int]:
    """Order, then report the request as sent with nothing cached beyond the shadow's guess."""
    ordered = ordering.order(strategy, chunks, PREFIX)
    ordering.observe(PREFIX, ids(ordered), 10_000, 10_000)
    return ids(ordered)


def test_the_longest_token_weighted_cached_path_comes_first() -> None:
    ordering = default_ordering(10**6)
    heavy, a, b = chunk(1, tokens=900), chunk(2), chunk(3)
    send(ordering, "relevance", [a, b, chunk(9)])  # cached: a, b (A/B: any strategy is seen)
    send(ordering, "relevance", [heavy, chunk(8)])  # cached: heavy (more tokens than a + b)
    # relevance order puts a new chunk first; the cached path still leads
    assert send(ordering, "prefix", [chunk(5), a, heavy, b])[0] == 1
    # without the heavy chunk the two-chunk path a, b is followed, in its cached order
    assert send(ordering, "prefix", [chunk(6), b, a, chunk(7)])[:2] == [2, 3]


def test_most_relevant_uncached_chunk_goes_last() -> None:
    ordering = default_ordering(10**6)
    send(ordering, "prefix", [chunk(1), chunk(2)])
    # 4 is the most relevant; 1 is cached, so 4 (uncached) goes last, right before the question
    order = send(ordering, "prefix", [chunk(4), chunk(1), chunk(3)])
    assert order[0] == 1 and order[-1] == 4
    # when the most relevant chunk is on the cached path it stays there
    order = send(ordering, "prefix", [chunk(1), chunk(5), chunk(6)])
    assert order[0] == 1 and order[-1] == 5


def test_popular_chunks_are_placed_first_among_the_uncached() -> None:
    strategy = PrefixOrdering(10**6)
    for _ in range(5):
        strategy([chunk(30)], PREFIX)  # 30 is retrieved often
    strategy([chunk(20)], PREFIX)
    # nothing cached: most relevant (10) last; the rest most popular first, not by doc id
    order = ids(strategy([chunk(10), chunk(20), chunk(30), chunk(40)], PREFIX))
    assert order == [30, 20, 40, 10]
    # equally popular chunks take a query-independent order (document, chunk id)
    again = ids(strategy([chunk(10), chunk(40), chunk(20), chunk(30)], PREFIX))
    assert again[:-1] == [30, 20, 40]


def test_popularity_seeding_makes_later_requests_share_a_prefix() -> None:
    ordering = default_ordering(10**6)
    topic = [chunk(i) for i in range(1, 7)]
    for i in range(6):  # warm popularity: chunks 1 and 2 come back in every request
        send(ordering, "prefix", [topic[2 + i % 4], topic[0], topic[1]])
    first = send(ordering, "prefix", [topic[5], topic[0], topic[1], topic[3]])
    second = send(ordering, "prefix", [topic[4], topic[1], topic[0], topic[2]])
    assert first[:2] == second[:2] == [1, 2]


def test_relevance_hint_follows_the_documents_in_relevance_order() -> None:
    ordering = default_ordering(10**6)
    retrieved = [chunk(4), chunk(1), chunk(3)]
    send(ordering, "prefix", [chunk(1)])
    ordered = ordering.order("prefix", retrieved, PREFIX)
    new, citations = number_chunks(ordered, {}, relevance=retrieved)
    text = render_user_turn("What is it?", new, citations)
    docs, hint = text.index("Documents:"), text.index("Most relevant documents:")
    assert docs < hint < text.index("Question: What is it?")
    number = {c.chunk_id: c.number for c in citations}
    assert f"[{number[4]}], [{number[1]}], [{number[3]}]" in text[hint:]


def test_facade_names_errors_and_weights() -> None:
    ordering = default_ordering()
    assert {"relevance", "doc_id", "prefix"} <= set(ordering.names())
    assert ("contextpilot" in ordering.names()) == contextpilot_available()
    with pytest.raises(OrderingError, match="unknown ordering strategy 'nope'"):
        ordering.order("nope", [chunk(1)], PREFIX)
    assert relevance_order([chunk(2), chunk(1)], PREFIX) == [chunk(2), chunk(1)]
    assert ids(ordering.order("doc_id", [chunk(2), chunk(1)], PREFIX)) == [1, 2]
    assert chunk_weight(chunk(1, tokens=200)) > 200
    assert ordering.order("prefix", [], PREFIX) == []


@pytest.mark.skipif(not contextpilot_available(), reason="contextpilot is not installed (dev)")
def test_contextpilot_adapter_orders_shared_docs_first(capsys: pytest.CaptureFixture) -> None:
    ordering = default_ordering()
    first = send(ordering, "contextpilot", [chunk(1), chunk(2), chunk(3), chunk(4)])
    assert sorted(first) == [1, 2, 3, 4]
    second = send(ordering, "contextpilot", [chunk(9), chunk(8), chunk(2), chunk(1)])
    assert sorted(second) == [1, 2, 8, 9]
    # ContextPilot moves the docs it has seen together to the front
    assert set(second[:2]) == {1, 2}
    assert capsys.readouterr().out == ""  # its progress report does not reach stdout


# ---- cache riders: candidates beyond the top-k, sent along where the engine has them cached ----


def rider_ordering() -> tuple[ContextOrdering, PrefixOrdering]:
    """The facade with ``prefix`` and ``relevance`` and the shadow ``prefix`` reads."""
    ours = PrefixOrdering(10**6)
    return ContextOrdering({"prefix": ours, "relevance": relevance_order}, [ours]), ours


def test_riders_are_taken_only_where_they_lie_on_the_cached_path() -> None:
    ordering, _ours = rider_ordering()
    a, b, c, x, y = chunk(1), chunk(2), chunk(3), chunk(8), chunk(9)
    send(ordering, "relevance", [a, b, c])  # cached: system, a, b, c
    # required b and x; candidates c, a (ranked), y: a and c lie on the cached path with b
    ordered = ordering.order("prefix", [x, b], PREFIX, candidates=[c, a, y])
    assert ids(ordered) == [1, 2, 3, 8]  # cached path a, b, c first; x (uncached) last
    assert ids(riders_in(ordered, [c, a, y])) == [3, 1]  # in rank order; y is not cached
    # nothing cached below another prefix: no riders there, whatever is offered
    other = ("system:fedcba9876543210",)
    assert ids(ordering.order("prefix", [x, b], other, candidates=[a, c, y])) == [2, 8]


def test_required_chunks_always_come_and_the_rider_budget_holds() -> None:
    ordering, _ours = rider_ordering()
    a, b, c, d, x = chunk(1), chunk(2), chunk(3), chunk(4), chunk(8)
    send(ordering, "relevance", [a, b, c, d])
    offered = [a, c, d]
    # budget 1: a rides (it leads to the required b); c and d would be a second and third
    ordered = ordering.order("prefix", [x, b], PREFIX, offered, max_riders=1)
    assert ids(ordered) == [1, 2, 8]
    # budget 0 (riders off) is the order without candidates
    off = ordering.order("prefix", [x, b], PREFIX, offered, max_riders=0)
    assert ids(off) == ids(ordering.order("prefix", [x, b], PREFIX)) == [2, 8]
    # required chunks come first in importance: a cached path through more required tokens
    # beats one through more rider tokens
    send(ordering, "relevance", [chunk(5, tokens=900), b])  # cached: heavy rider, then b
    send(ordering, "relevance", [x])  # cached: x alone (100 tokens, required)
    ordered = ordering.order("prefix", [x, chunk(7)], PREFIX, [chunk(5, tokens=900)])
    assert ids(ordered) == [8, 7]
    # a candidate that is also required is placed once, as required
    ordered = ordering.order("prefix", [b, x], PREFIX, [b, a], max_riders=2)
    assert sorted(ids(ordered)) == [1, 2, 8] and ids(riders_in(ordered, [a])) == [1]


def test_strategies_without_riders_ignore_candidates() -> None:
    ordering = default_ordering(10**6)
    a, b, x = chunk(1), chunk(2), chunk(8)
    send(ordering, "relevance", [a, b])
    for name in ordering.names():
        if name == "prefix":
            continue
        ordered = ordering.order(name, [x, b], PREFIX, candidates=[a])
        assert sorted(ids(ordered)) == [2, 8], name


def test_riders_are_numbered_cited_and_left_out_of_the_hint() -> None:
    ordering, ours = rider_ordering()
    a, b, c, x = chunk(1), chunk(2), chunk(3), chunk(8)
    send(ordering, "relevance", [a, b, c])
    retrieved, offered = [x, b], [c, a]
    ordered = ordering.order("prefix", retrieved, PREFIX, offered)
    riders = riders_in(ordered, offered)
    new, citations = number_chunks(ordered, {}, relevance=retrieved, riders=riders)
    assert [(n, c.chunk_id) for n, c in new] == [(1, 1), (2, 2), (3, 3), (4, 8)]
    # citations: the retrieved chunks by relevance, then the riders by rank, flagged
    assert [(c.chunk_id, c.rider) for c in citations] == [(8, 0), (2, 0), (3, 1), (1, 1)]
    text = render_user_turn("What is it?", new, citations)
    hint = text[text.index("Most relevant documents:") :]
    assert hint.startswith("Most relevant documents: [4], [2]\n")  # riders [1], [3] not listed
    # the most relevant uncached required chunk is the last document, right before the hint
    assert text.index("[4] Doc 8") > text.index("[3] Doc 3")
    # observe() follows riders like any sent chunk: the shadow now holds x after a, b, c
    ordering.observe(PREFIX, [c.chunk_id for _n, c in new], 10_000, 10_000)
    held = ours.shadow.walk((*PREFIX, 1, 2, 3, 8))
    assert [n.key for n in held[1:]] == [1, 2, 3, 8]
    assert held[-1].tokens == chunk_weight(x)


class Greedy:
    """A strategy that breaks the rider contract: it sends every candidate, cached or not."""

    takes_riders = True

    def __call__(self, chunks, prefix, candidates=(), max_riders=0):  # noqa: ANN001, ANN204
        return [*chunks, *candidates]


def test_the_facade_enforces_the_rider_budget() -> None:
    ordering = ContextOrdering({"greedy": Greedy()})
    assert ids(ordering.order("greedy", [chunk(1)], PREFIX, [chunk(2)], max_riders=1)) == [1, 2]
    with pytest.raises(OrderingError, match="rider contract"):
        ordering.order("greedy", [chunk(1)], PREFIX, [chunk(2), chunk(3)], max_riders=1)
    # riders off: the strategy is not offered candidates at all
    assert ids(ordering.order("greedy", [chunk(1)], PREFIX, [chunk(2)], max_riders=0)) == [1]
