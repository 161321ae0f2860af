"""The speculation bench fills the engine's draft pool itself, never with the answer it times."""

from __future__ import annotations

from types import SimpleNamespace

from appliance.bench.spec_bench import Answers, Run
from engine.embedded.draft_pool import DraftPool


def _run(ids: list[int]) -> Run:
    return Run("", len(ids), 1.0, 0, 0, [], ids)


def test_a_row_drafts_from_every_earlier_answer_but_its_own() -> None:
    pool = DraftPool(10_000, 3)
    answers = Answers(SimpleNamespace(draft_pool=pool))  # the real pool; the engine is not used
    assert pool.learning is False  # the engine adds nothing on its own during the bench
    q1, q2 = (("user", "one"),), (("user", "two"),)
    answers.prepare([q1, q2])
    assert pool.size == 0
    answers.learn([q1], [_run([1, 2, 3, 4])])
    assert pool.match([1, 2, 3], 4) == (3, [4])  # later prompts of the row draft from it
    answers.learn([q2], [_run([7, 8, 9, 10])])
    answers.prepare([q1])  # a row that asks q1 again: q2's answer, not q1's own
    assert pool.match([1, 2, 3], 4) == (0, []) and pool.match([7, 8, 9], 4) == (3, [10])
    answers.prepare([q1], own=True)  # the "asked again" row: its own answer too
    assert pool.match([1, 2, 3], 4) == (3, [4])
