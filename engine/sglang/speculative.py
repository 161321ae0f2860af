"""Speculative decoding as a profile option: NGRAM (drafts from n-grams already seen, no draft
model), off by default until measured on the site's GPU.

Why it may pay for RAG: answers copy spans of the retrieved passages, which NGRAM's trie holds,
so several tokens can be verified per forward pass at low batch sizes. Its costs, as sglang
0.5.23 enforces them (``srt/arg_groups/speculative_hook.py`` ``_handle_ngram``,
``srt/speculative/spec_info.py``):

* mixed chunked prefill is forced off (``enable_mixed_chunk=False``): the tuner never passes
  ``--enable-mixed-chunk``, and ``ngram_args`` drops it from an argv that has it;
* each running request verifies ``NUM_DRAFT_TOKENS`` tokens per step, so a large batch pays
  more compute than it gains: SGLang caps speculative servers at 48 running requests when none
  is given, and the tuner caps ``--max-running-requests`` at ``MAX_RUNNING`` likewise;
* the draft tree's breadth (``--speculative-ngram-max-bfs-breadth``, default 10) becomes
  ``speculative_eagle_topk``; with topk > 1 a page size > 1 is refused unless the attention
  backend is flashinfer ("unstable and produces incorrect results"), so with NGRAM the tuner
  keeps SGLang's page size 1 (HiCache works at page size 1 as well);
* grammar-constrained decoding stays synchronous with NGRAM (``supports_grammar_overlap``).

The overlap scheduler is disabled by NGRAM only on CPU in 0.5.23
(``_disable_overlap_schedule_for_cpu``); older releases disabled it on GPUs too. NGRAM does not
conflict with HiCache or the radix cache in 0.5.23 (the HiCache rule on speculative decoding,
``hicache_hook.py`` ``resolve_hicache_dcp_compatibility``, applies only with ``--dcp-size`` > 1).
"""

from __future__ import annotations

from typing import Literal, cast

Speculative = Literal["", "ngram"]
CHOICES: tuple[Speculative, ...] = ("", "ngram")
# SGLang's own defaults for NGRAM, pinned so an upgrade that changes them shows in the launch
# test rather than silently on the GPU: 12 draft tokens (``_handle_ngram``), a breadth-10 BFS
# tree from n-grams up to 18 tokens deep (fields/spec.py).
NUM_DRAFT_TOKENS = 12
MAX_BFS_BREADTH = 10
MAX_TRIE_DEPTH = 18
MAX_RUNNING = 48
_DROPPED = ("--enable-mixed-chunk",)


def ngram_args() -> list[str]:
    """The NGRAM launch flags (names and defaults from sglang 0.5.23 fields/spec.py)."""
    return [
        "--speculative-algorithm",
        "NGRAM",
        "--speculative-num-draft-tokens",
        str(NUM_DRAFT_TOKENS),
        "--speculative-ngram-max-bfs-breadth",
        str(MAX_BFS_BREADTH),
        "--speculative-ngram-max-trie-depth",
        str(MAX_TRIE_DEPTH),
    ]


def without_incompatible(argv: list[str]) -> list[str]:
    """``argv`` less the switches SGLang turns off under NGRAM (mixed chunked prefill)."""
    return [a for a in argv if a not in _DROPPED]


def check(speculative: str) -> Speculative:
    """``speculative`` if it is a known option; else ValueError."""
    if speculative not in CHOICES:
        raise ValueError(f"unknown speculative option {speculative!r}: one of {CHOICES}")
    return cast(Speculative, speculative)
