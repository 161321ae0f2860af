"""``pack_step``: the token order of one scheduler step and where each logit row lands."""

from __future__ import annotations

from engine.base import SamplingParams
from engine.embedded.sequence import Job, Sequence
from engine.embedded.step_pack import pack_step
from engine.embedded.textstream import TextStream


def _seq(ids: list[int], fed: int, slot: int, pending: int | None = None) -> Sequence:
    job = Job(rid=f"r{slot}", ids=ids, sampling=SamplingParams(8))
    stream = TextStream(decode=lambda toks: "", stops=[])
    seq = Sequence(job=job, cached=0, budget=8, stream=stream, eos=frozenset(), fed=ids[:fed])
    seq.slot, seq.pending = slot, pending
    return seq


def test_decode_tokens_then_drafts_then_prompts_within_the_budget() -> None:
    a = _seq([1, 2, 3], 3, slot=0, pending=50)
    b = _seq([4, 5], 2, slot=1, pending=60)
    c = _seq(list(range(100, 110)), 4, slot=7)  # 6 prompt tokens left
    step = pack_step([a, b], [a, b, c], {1: [61, 62]}, room=5)
    assert step is not None
    # pending tokens, row 1's drafts, then as much of c's prompt as the budget leaves (3)
    assert step.tokens == [50, 60, 61, 62, 104, 105, 106]
    assert step.verify_rows == {0: [0], 1: [1, 2, 3]}
    assert step.draft_counts == [(1, 2)]
    assert [(s.slot, s.start, s.count) for s in step.segments] == [(7, 4, 3)]
    assert step.keep == [0, 1, 2, 3, 6] and step.last_rows == [4]


def test_nothing_to_run() -> None:
    assert pack_step([], [], {}, room=512) is None
