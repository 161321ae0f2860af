"""What one scheduler step feeds the model: the packed token list and where each result lands.

A step packs, in this order: one pending token for each decoding row ``0 .. n - 1``; then each
row's speculative drafts (decode queries on its own row, ``spec_verify.py``); then prompt
tokens of requests still prefilling, oldest first, while the step's token budget lasts. The
logits the forward keeps (``keep``) are, in order: one row per decoding request, each draft's
row, and per prefill segment the rows of any prompt logprobs asked for, then its last token's.
Pure bookkeeping over token ids: no tensors, no engine state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.embedded.attention import Segment
from engine.embedded.sequence import Sequence


@dataclass
class PackedStep:
    tokens: list[int] = field(default_factory=list)
    keep: list[int] = field(default_factory=list)  # token indices whose logits are kept
    # decoding row -> its rows in the kept logits: its pending token's, then each draft's
    verify_rows: dict[int, list[int]] = field(default_factory=dict)
    drafts: dict[int, list[int]] = field(default_factory=dict)  # decoding row -> its drafts
    segments: list[Segment] = field(default_factory=list)
    owners: list[Sequence] = field(default_factory=list)  # the request of each segment
    last_rows: list[int] = field(default_factory=list)  # each segment's last token's logit row
    # (request, first prompt position scored, first logit row, rows): prompt logprobs asked
    scored: list[tuple[Sequence, int, int, int]] = field(default_factory=list)

    @property
    def draft_counts(self) -> list[tuple[int, int]]:
        """``(row, count)`` of every row with drafts, in packing order (``make_plan``)."""
        return [(row, len(draft)) for row, draft in self.drafts.items()]


def pack_step(
    decoding: list[Sequence], active: list[Sequence], drafts: dict[int, list[int]], room: int
) -> PackedStep | None:
    """Pack a step from the decoding rows, their ``drafts`` and the requests still prefilling
    among ``active`` (in admission order), ``room`` tokens for drafts and prompts together;
    None when there is nothing to run."""
    n = len(decoding)
    step = PackedStep(tokens=[s.pending for s in decoding], keep=list(range(n)), drafts=drafts)
    step.verify_rows = {row: [row] for row in range(n)}
    for row, draft in drafts.items():
        step.verify_rows[row] += range(len(step.keep), len(step.keep) + len(draft))
        step.keep += range(len(step.tokens), len(step.tokens) + len(draft))
        step.tokens += draft
        room -= len(draft)
    for seq in active:
        if room <= 0:
            break
        if seq.prefilling:
            start = len(seq.fed)
            count = min(room, len(seq.job.ids) - start)
            step.segments.append(Segment(seq.slot, start, count))
            step.owners.append(seq)
            room -= count
    if not step.segments and not n:
        return None
    for seg, seq in zip(step.segments, step.owners, strict=True):
        first = len(step.tokens)
        step.tokens += seq.job.ids[seg.start : seg.start + seg.count]
        lo, hi = seq.prompt_logit_span(seg.start, seg.count)
        if hi > lo:  # prompt logprobs asked: keep the rows of the positions they score
            step.scored.append((seq, lo, len(step.keep), hi - lo))
            step.keep.extend(range(first + lo - seg.start, first + hi - seg.start))
        step.last_rows.append(len(step.keep))
        step.keep.append(len(step.tokens) - 1)
    return step
