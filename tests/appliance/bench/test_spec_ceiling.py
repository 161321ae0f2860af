"""The lookup ceiling is an upper bound on what the engine's n-gram drafter achieves."""

from __future__ import annotations

import random

import pytest

from appliance.bench.draft_agreement import lookup_steps
from appliance.bench.spec_ceiling import lookup_ceiling
from engine.embedded.ngram_draft import DraftConfig


def test_an_answer_copied_from_the_prompt_takes_a_step_per_draft_run() -> None:
    prompt = list(range(100, 140))
    answer = prompt[10:30]  # copied
    # the prompt's last token occurred nowhere before: the first step emits one token; then
    # every step 4 drafts and the model's own token: 1 + 5 + 5 + 5 + 4
    assert lookup_ceiling(prompt, answer, max_tokens=4) == (20, 5)
    # no earlier occurrence of anything: one token a step
    assert lookup_ceiling([1, 2, 3], [7, 8, 9, 10]) == (4, 4)
    assert lookup_ceiling([], []) == (0, 0)


def test_every_branch_is_tried_not_only_the_latest_occurrence() -> None:
    # "5" was followed by 6 7 8 9 first and by 1 later: the latest occurrence guesses 1
    prompt = [5, 6, 7, 8, 9, 0, 5, 1]
    answer = [5, 6, 7, 8, 9]
    # the first token has nothing to follow; then one step: 4 drafts and the model's own
    assert lookup_ceiling(prompt, answer) == (5, 2)
    assert lookup_steps(prompt, answer, DraftConfig()) > 1


@pytest.mark.parametrize("seed", range(20))
def test_the_ceiling_is_never_beaten_by_the_engine_drafter(seed: int) -> None:
    rng = random.Random(seed)
    vocab = rng.randint(3, 12)  # few distinct tokens: many repeats, many matches
    prompt = [rng.randrange(vocab) for _ in range(rng.randint(0, 60))]
    answer = [rng.randrange(vocab) for _ in range(rng.randint(1, 60))]
    if rng.random() < 0.5:  # some copying, as RAG answers do
        at = rng.randrange(len(prompt) + 1)
        answer[: rng.randint(0, 20)] = prompt[at : at + 20]
        answer = answer or [0]
    tokens, steps = lookup_ceiling(prompt, answer)
    assert tokens == len(answer)
    assert steps <= lookup_steps(prompt, answer, DraftConfig())


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError):
        lookup_ceiling([1], [1], max_tokens=0)
