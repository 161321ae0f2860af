"""The cache shadow follows whole conversations: a turn is recorded under the keys the next turn
walks (its chunks, the rest of its user message, its answer), so the shadow neither counts a
conversation's tokens twice nor loses track of it; through the bench's replay and the real chat
service. Also: history cut to the last turns renders again what only a dropped turn showed."""

from __future__ import annotations

from dataclasses import replace

from appliance.core.services.chat import ChatService, DoneEvent, owned_conversation
from appliance.core.services.turn_history import StoredTurn, stored_turns
from appliance.core.services.turn_prompt import TurnPrompts
from rag.layout import APPEND, SentTurn
from rag.ordering.base import ContextOrdering
from rag.ordering.prefix import PrefixOrdering
from rag.ordering.sent import Sent
from rag.ordering.shadow import ShadowTrie
from rag.prompt_keys import (
    RenderedTurn,
    answer_key,
    is_answer_key,
    is_tail_key,
    rendered_numbers,
    shadow_prefix,
    tail_key,
)

QUESTION = "How do I reset my VPN password?"


def own_ordering(capacity: int) -> tuple[ContextOrdering, PrefixOrdering]:
    ours = PrefixOrdering(capacity)
    return ContextOrdering({"prefix": ours}, observers=[ours]), ours


def test_rendered_numbers_are_the_chunks_each_turn_numbered_first() -> None:
    cited = [
        [{"chunk_id": 7, "number": 2}, {"chunk_id": 3, "number": 1}],
        [{"chunk_id": 3, "number": 1}, {"chunk_id": 9, "number": 3}],  # 3 again: known
        [{"chunk_id": 9, "number": 3}],  # nothing new
        [{"chunk_id": 5, "number": 5}, {"chunk_id": 4, "number": 4}],
    ]
    assert rendered_numbers(cited) == [{3: 1, 7: 2}, {9: 3}, {}, {4: 4, 5: 5}]
    assert [list(n) for n in rendered_numbers(cited)][3] == [4, 5]  # prompt order


def test_shadow_prefix_keys_each_turn_as_chunks_tail_and_answer() -> None:
    turns = [
        RenderedTurn((3, 7), "Documents: ... Question: a?", "It is [1]."),
        RenderedTurn((), "b?", "No."),
    ]
    keys = shadow_prefix("policy", turns)
    assert keys[1:] == (
        3,
        7,
        tail_key(turns[0].user_turn),
        answer_key("It is [1]."),
        tail_key("b?"),
        answer_key("No."),
    )
    assert keys[0] == shadow_prefix("policy", [])[0] and len(set(keys)) == len(keys)
    assert is_answer_key(keys[4]) and not any(is_answer_key(k) for k in keys[:4])
    assert [is_tail_key(k) for k in keys] == [False, False, False, True, False, True, False]


def test_an_answer_that_did_not_match_is_dropped_alone() -> None:
    shadow = ShadowTrie(10_000)
    shadow.record(["s", 1, 2, "user:x"], [300, 100, 100, 20])  # another conversation
    shadow.record(["s", 1, "user:a", "assistant:b"], [300, 100, 20, 50])
    # the next turn: the engine matched up to the answer, not into it (it re-tokenised)
    path = ["s", 1, "user:a", "assistant:b", 5, "user:c"]
    assert shadow.sync(path, cached_tokens=420, local=is_answer_key) is False
    assert shadow.find(["s", 1, "user:a"]) is not None
    assert shadow.find(["s", 1, "user:a", "assistant:b"]) is None
    assert shadow.find(["s", 1, 2, "user:x"]) is not None  # nothing else is forgotten
    assert shadow.capacity == 10_000 and shadow.total_tokens == 540
    # the same shortfall at a chunk is an eviction: everything older goes too
    assert shadow.sync(["s", 1, 2, "user:x"], cached_tokens=300, local=is_answer_key) is True
    assert shadow.find(["s", 1]) is None


def test_the_shadow_holds_a_replayed_workload_once(engine) -> None:  # noqa: ANN001
    from appliance.bench.ordering.radix import RadixLRU
    from appliance.bench.ordering.replay import PieceTokenizer, Replayer, simulator_backend
    from appliance.bench.ordering.workload import make_workload

    workload = make_workload(
        60,
        topics=6,
        chunk_words=20,
        system_words=40,
        answer_words=8,
        count_tokens=engine.count_tokens,
    )
    pieces = PieceTokenizer(engine.encode)
    radix = RadixLRU(10**7)
    ordering, ours = own_ordering(10**7)
    player = Replayer(workload, ordering, "prefix", simulator_backend(radix, pieces), riders=2)
    found = follow_ups = 0
    for t in workload.turns:
        conv = player.conversations.get(t.session)
        if conv is not None:  # a follow-up: its whole prefix is held where the last turn left it
            follow_ups += 1
            found += ours.shadow.find(conv.keys) is not None
        player.play(t)
    assert follow_ups > 20 and found == follow_ups
    # the shadow's estimate of what the engine holds is the engine's, not 1.5x or 2x of it
    assert 0.9 < ours.shadow.total_tokens / radix.total_tokens < 1.1


def test_a_follow_up_through_the_chat_service_is_predicted_as_cached(appliance) -> None:  # noqa: ANN001
    ordering, ours = own_ordering(appliance.config.engine.kv_budget_tokens)
    chat = ChatService(
        appliance.db,
        appliance.knowledge,
        appliance.engine,
        appliance.config.chat,
        appliance.settings,
        ordering,
    )
    user = appliance.auth.create_user("staff-shadow-follow", "password-123", role="staff")
    first = list(chat.ask(user, QUESTION))[-1]
    assert isinstance(first, DoneEvent)
    with appliance.db.session() as s:
        stored = stored_turns(owned_conversation(s, user, first.conversation_id))
    prepared = chat.prompts.prepare(
        user, "And on my phone?", first.conversation_id, stored, appliance.settings.current()
    )
    # the shadow walks the whole first turn (system, its chunks, its tail, the answer)
    assert prepared.layout == "append"
    assert ours.shadow.find(prepared.prompt.prefix) is not None
    predicted = ours.shadow.predicted_cached(prepared.prompt.prefix)
    later = list(chat.ask(user, "And on my phone?", first.conversation_id))[-1]
    assert isinstance(later, DoneEvent)
    # the engine reused the whole first turn, as predicted: at most the answer may fall short
    # (the engine caches the tokens it generated; their re-rendered text could tokenise
    # differently), never the documents or the question
    slack = max(32, later.stats.cached_tokens // 20)
    cached = later.stats.cached_tokens
    assert cached - slack <= predicted <= cached + first.stats.completion_tokens + slack
    assert cached > first.stats.prompt_tokens - 2  # the first prompt was reused whole
    # the second turn is on record under the keys a third turn walks, counted once
    with appliance.db.session() as s:
        stored = stored_turns(owned_conversation(s, user, first.conversation_id))
    third = chat.prompts.prepare(
        user, "What if it is locked?", first.conversation_id, stored, appliance.settings.current()
    )
    assert ours.shadow.find(third.prompt.prefix) is not None
    held = later.stats.prompt_tokens + later.stats.completion_tokens
    assert ours.shadow.total_tokens <= held + 64


def test_history_cut_to_the_last_turn_renders_again_what_only_a_dropped_turn_showed(
    appliance,
) -> None:  # noqa: ANN001
    ordering, _ours = own_ordering(10**6)
    prompts = TurnPrompts(appliance.knowledge, appliance.engine, ordering, history_turns=1)
    user = appliance.auth.create_user("staff-shadow-cut", "password-123", role="staff")
    settings = replace(appliance.settings.current(), riders=0, ordering="prefix", layout="append")
    top = appliance.knowledge.retrieve(QUESTION, settings.top_k)[0]
    a, *rest = top
    cite = lambda c, n: {"chunk_id": c.chunk_id, "number": n}  # noqa: E731
    one, two = "turn one, which rendered [1] and [2]", "turn two, which rendered [3]"
    stored = [
        StoredTurn(
            SentTurn(APPEND, one, "hint one", "", ((a.chunk_id, 1), (rest[0].chunk_id, 2))),
            "one",
            [cite(a, 1), cite(rest[0], 2)],
        ),
        # cites [1] again: it was in the prompt then
        StoredTurn(
            SentTurn(APPEND, two, "hint two", "", ((rest[1].chunk_id, 3),)),
            "two",
            [cite(a, 1), cite(rest[1], 3)],
        ),
    ]
    prepared = prompts.prepare(user, QUESTION, None, stored, settings)
    numbers = {c.chunk_id: c.number for c in prepared.citations}
    # only turn two is in the prompt: [1] is gone with turn one, so its chunk is rendered again,
    # under the number it has had all along; the chunk turn two rendered keeps its number
    assert numbers[rest[1].chunk_id] == 3 and numbers[a.chunk_id] == 1
    assert a.text.strip()[:60] in prepared.prompt.user
    assert [m[0] for m in prepared.messages] == ["system", "user", "assistant", "user"]
    assert prepared.messages[1] == ("user", two)
    # turn two now follows the system prompt: its [3] at position 1 is keyed by its number
    assert prepared.prompt.prefix == (
        *shadow_prefix(settings.system_prompt, [])[:1],
        (rest[1].chunk_id, 3),
        tail_key(two),
        answer_key("two"),
    )


def test_sent_carries_what_the_facade_knows() -> None:
    seen: list[Sent] = []

    class Spy:
        def observe(self, sent: Sent) -> None:
            seen.append(sent)

    from rag.ordering.base import relevance_order
    from rag.types import RetrievedChunk

    chunk = RetrievedChunk(4, 1, "Doc", "", None, "text " * 30, "d.md", 1.0, token_count=40)
    ordering = ContextOrdering({"relevance": relevance_order}, observers=[Spy()])
    ordering.order("relevance", [chunk], ("system:x",))
    ordering.observe(
        ("system:x", 9), [4], 500, 100, tail="user:t", answer="assistant:a", completion_tokens=7
    )
    [sent] = seen
    assert sent.prefix == ("system:x", 9) and sent.chunk_ids == (4,)
    assert sent.weights == {4: 40 + 6} and sent.tail == "user:t" and sent.completion_tokens == 7
