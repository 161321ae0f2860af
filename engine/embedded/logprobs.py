"""Log probabilities of tokens from logits, as SGLang reports them (``return_logprob``; the
values' meaning is ``engine.base.LogprobOptions``'s). A row of logits at position ``p`` gives
the logprob of the token at ``p + 1``.
"""

from __future__ import annotations

import torch

from engine.base import LogprobOptions, TokenLogprob

# prompt rows are scored this many at a time: a float32 row over a 49k vocabulary is 192 KiB,
# so a 2,048-token prompt scored at once would hold 400 MiB
ROWS_PER_CHUNK = 256


LOWEST = torch.finfo(torch.float32).min  # what an impossible token's -inf is reported as


def first_logit_position(options: LogprobOptions) -> int:
    """The first prompt position whose logits a request needs for its prompt logprobs: the
    tokens from ``start_len`` on are reported, each scored by the logits of the position
    before it (the prompt's first token has none). The prefix cache may serve only the
    positions before this one."""
    return max(options.start_len - 1, 0)


def sampling_logprobs(logits: torch.Tensor, temperature: float, greedy: bool) -> torch.Tensor:
    """The 1-D logits a token is drawn from, as the logprobs reported for it: divided by the
    temperature unless decoding is greedy (SGLang's sampler), in float32."""
    row = logits.float()
    return row if greedy else row / temperature


def score_rows(
    logits: torch.Tensor, targets: list[int], options: LogprobOptions
) -> list[TokenLogprob]:
    """``TokenLogprob`` of ``targets[i]`` under ``logits[i]`` (``[R, V]``), with each row's
    ``top_n`` alternatives and the asked token ids."""
    out: list[TokenLogprob] = []
    for lo in range(0, len(targets), ROWS_PER_CHUNK):
        chunk = logits[lo : lo + ROWS_PER_CHUNK].float()
        out.extend(_score(torch.log_softmax(chunk, dim=-1), targets[lo : lo + len(chunk)], options))
    return out


def score_row(logits: torch.Tensor, target: int, options: LogprobOptions) -> TokenLogprob:
    """``score_rows`` for one 1-D row of logits."""
    return score_rows(logits.unsqueeze(0), [target], options)[0]


def _score(
    logprobs: torch.Tensor, targets: list[int], options: LogprobOptions
) -> list[TokenLogprob]:
    logprobs = logprobs.clamp(min=LOWEST)
    chosen = logprobs.gather(1, torch.tensor(targets).unsqueeze(1)).squeeze(1).tolist()
    top_vals = top_ids = asked = None
    if options.top_n:
        values, ids = torch.topk(logprobs, options.top_n, dim=-1)
        top_vals, top_ids = values.tolist(), ids.tolist()
    if options.token_ids:
        asked = logprobs[:, list(options.token_ids)].tolist()
    out = []
    for i, target in enumerate(targets):
        top = tuple(zip(top_ids[i], top_vals[i], strict=True)) if top_ids is not None else ()
        pairs = tuple(zip(options.token_ids, asked[i], strict=True)) if asked is not None else ()
        out.append(TokenLogprob(target, chosen[i], top, pairs))
    return out
