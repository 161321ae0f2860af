"""Speculative decoding with prompt-lookup drafts: its configuration, the per-request pacing of
drafts, the decision to decline, and the stats a request reports. How a step runs drafts and
the acceptance rule: ``spec_verify.py``; the proposer: ``ngram_draft.py``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from engine.base import GenerationStats
from engine.embedded.ngram_draft import DraftConfig

Mode = Literal["off", "ngram"]


@dataclass(frozen=True)
class SpeculativeConfig:
    """``mode``: "off", or "ngram" (prompt lookup); ``draft``: how drafts are proposed;
    ``max_step_drafts``: draft tokens in one step over all requests (a batch of many streams
    is compute-bound on a CPU, where drafts stop paying off); ``pool_tokens``: answer tokens
    the engine keeps to draft from across requests (``draft_pool.py``; 0: none; the engine
    sizes its pool once, at start)."""

    mode: Mode = "ngram"
    draft: DraftConfig = field(default_factory=DraftConfig)
    max_step_drafts: int = 16
    pool_tokens: int = 32768

    @property
    def enabled(self) -> bool:
        return self.mode != "off"


OFF = SpeculativeConfig(mode="off")
# the engine's default: on. ``appliance bench engine --speculative`` (2 vCPUs, bfloat16,
# SmolLM2-135M, greedy, 96 tokens; one engine switched off and on) measured decode tokens/s
# on/off: grounded RAG one at a time 1.48x on the dev questions (1.63 tokens a step) and 1.13x
# held out (1.23), 8 at a time 1.09x, open-ended text 1.28x alone and 1.07x 8 at a time
# (Zen 5, 2026-12-05; on Zen 4 that day 1.43x, 1.03x, 1.00x, 1.22x, 1.02x: no row slower, and
# greedy texts the same in every row). Where drafts would not pay, e.g. 8 streams on an AVX2
# float32 engine (0.93x before), the engine's draft budget runs none (``draft_budget.py``)
DEFAULT = SpeculativeConfig(mode="ngram")


def speculative_config(
    algorithm: str = "ngram",
    num_draft_tokens: int = 4,
    ngram_min: int = 1,
    ngram_max: int = 3,
    max_step_drafts: int = 16,
    pool_tokens: int = 32768,
) -> SpeculativeConfig:
    """From the appliance config's ``engine.speculative_*`` values (SGLang-like names)."""
    if algorithm not in ("off", "ngram"):
        raise ValueError(f"speculative algorithm must be 'off' or 'ngram', not {algorithm!r}")
    draft = DraftConfig(max_tokens=num_draft_tokens, min_ngram=ngram_min, max_ngram=ngram_max)
    return SpeculativeConfig(algorithm, draft, max_step_drafts, pool_tokens)


@dataclass(frozen=True)
class SpeculativeStats(GenerationStats):
    """A request's stats with its speculation record: ``speculative`` whether drafts were
    tried, else ``spec_declined`` says why not; ``spec_draft_tokens`` proposed and verified,
    ``spec_accepted_tokens`` of them accepted, over ``spec_verify_steps`` steps that ran
    drafts."""

    speculative: bool = False
    spec_declined: str = ""
    spec_draft_tokens: int = 0
    spec_accepted_tokens: int = 0
    spec_verify_steps: int = 0

    @property
    def acceptance_rate(self) -> float:
        return self.spec_accepted_tokens / self.spec_draft_tokens if self.spec_draft_tokens else 0.0


@dataclass
class DraftPacer:
    """How many drafts one request tries next, from how its last ones fared: all accepted,
    one more (up to ``max_tokens``); some rejected, one past the accepted run; none accepted
    ``n`` times running, no drafts for the next ``2 ** n`` steps (at most ``MAX_PAUSE``). Text
    that copies nothing then costs a verify step now and then, not every step.

    A request decoding *alone* always drafts ``max_tokens``: its drafts are decode queries on
    its own row, whose cost is mostly the linears' extra rows (4 drafts: 1.21x one row's
    linears, the weights read once; SmolLM2-135M, 2 vCPUs), while pacing gave up about half
    the accepted tokens: on the dev questions always drafting gave 1.30-1.44x on/off against
    1.20-1.26x paced."""

    max_tokens: int
    length: int = 0
    pause: int = 0
    misses: int = 0

    MAX_PAUSE = 16

    def __post_init__(self) -> None:
        self.length = self.length or self.max_tokens

    def next_length(self, alone: bool) -> int:
        """Drafts to try this step, 0 while paused (a paused request counts its pause down)."""
        if alone:
            return self.max_tokens
        if self.pause:
            self.pause -= 1
            return 0
        return self.length

    def update(self, drafted: int, accepted: int) -> None:
        if accepted == drafted:
            self.length = min(self.max_tokens, self.length + 1)
        else:
            self.length = max(1, accepted + 1)
        self.misses = 0 if accepted else self.misses + 1
        if self.misses:
            self.pause = min(self.MAX_PAUSE, 2**self.misses)


def speculation_gauges(counters: dict[str, float]) -> dict[str, float]:
    """SGLang's two speculation gauges from the engine's counters, since start:
    ``spec_accept_rate``, accepted drafts over drafted tokens, and ``spec_accept_length``, the
    tokens a verify step emits (its accepted drafts plus the model's own token); 0.0 before
    any step verified drafts."""
    drafted = counters.get("spec_draft_tokens_total", 0.0)
    accepted = counters.get("spec_accepted_tokens_total", 0.0)
    steps = counters.get("spec_verify_steps_total", 0.0)
    return {
        "spec_accept_rate": accepted / drafted if drafted else 0.0,
        "spec_accept_length": (accepted + steps) / steps if steps else 0.0,
    }


def decline_reason(config: SpeculativeConfig) -> str:
    """Why a request is served without speculation ("" when it is served with it). Every
    sampling option, penalty, grammar and logprob request is verified exactly (``verify``), so
    only the engine's config declines today."""
    if not config.enabled:
        return "speculative decoding is off in the engine config"
    return ""
