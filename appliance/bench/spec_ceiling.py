"""The lookup ceiling: tokens a step that *any* prompt-lookup drafter could reach on an answer.

Prompt-lookup speculation can only propose what followed an earlier occurrence of the
history's last ``n`` tokens. The ceiling replays a known answer (the one the model gave with
speculation off) step by step and, at each step, lets an oracle try *every* earlier
occurrence of every suffix n-gram (a draft tree with unlimited branches, verified for free),
keeping the longest run of up to ``max_tokens`` that the answer really continues with. A step
emits that run plus the model's own token. No drafter of that family (the engine's is one
branch, the latest occurrence of the longest match) makes fewer steps, so when the ceiling is
below a speed-up target, no tuning of the drafter reaches it on that text: only drafts from
outside the request's history could. Pure over token ids.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence


def lookup_ceiling(
    prompt: Sequence[int], answer: Sequence[int], max_tokens: int = 4, max_ngram: int = 3
) -> tuple[int, int]:
    """(tokens, steps) for ``answer`` after ``prompt`` with oracle drafts of up to
    ``max_tokens`` from n-gram matches of sizes 1 .. ``max_ngram``; tokens / steps is the
    ceiling of tokens a step."""
    if max_tokens < 1 or max_ngram < 1:
        raise ValueError("lookup ceiling: need max_tokens >= 1 and max_ngram >= 1")
    history = list(prompt)
    # n-gram -> positions of the tokens that followed it, every occurrence
    after: dict[tuple[int, ...], list[int]] = defaultdict(list)

    def index(end: int) -> None:  # the n-grams ending just before position ``end``
        for n in range(1, max_ngram + 1):
            if end >= n:
                after[tuple(history[end - n : end])].append(end)

    for end in range(len(history)):
        index(end)
    done = steps = 0
    while done < len(answer):
        best = 0
        for n in range(1, max_ngram + 1):
            for at in after.get(tuple(history[-n:]), ()) if len(history) >= n else ():
                run = 0
                while (
                    run < max_tokens
                    and done + run < len(answer)
                    and at + run < len(history)
                    and history[at + run] == answer[done + run]
                ):
                    run += 1
                best = max(best, run)
        emitted = min(best + 1, len(answer) - done)
        for token in answer[done : done + emitted]:
            history.append(token)
            index(len(history) - 1)
        done += emitted
        steps += 1
    return len(answer), steps
