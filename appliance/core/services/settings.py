"""Runtime chat settings: config defaults, overridden from the admin console without a restart.

Every turn reads ``current()``, so a change applies to the next turn in every worker. Each
change is written together with its audit event, in one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from sqlalchemy import select

from appliance.core.db.models import AuditEvent, Setting, utcnow
from appliance.core.db.session import Database
from appliance.core.services.grounding import ANSWER_MODES, AnswerMode
from engine.base import SamplingParams
from rag.layout import ADAPTIVE, LAYOUTS


class SettingsError(ValueError):
    """A setting value that cannot be applied; the message names the key."""


@dataclass(frozen=True)
class ChatSettings:
    system_prompt: str
    top_k: int
    ordering: str
    temperature: float
    max_new_tokens: int
    # cache riders: candidates retrieved beyond top_k, sent along only where the engine has
    # them cached (strategies that take riders: ``prefix``); 0 disables. Same default as
    # ``RagConfig.riders``
    riders: int = 6
    # the prompt layout of a follow-up (``rag.layout``): adaptive (the one with the fewer
    # tokens the cache shadow predicts uncached), append or relay. Same default as
    # ``RagConfig.layout``
    layout: str = ADAPTIVE
    # repetition control: SGLang's sampling parameters, with its ranges (``ChatConfig`` has the
    # same defaults and says why)
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.15
    min_p: float = 0.0
    sampling_top_k: int = -1  # tokens to sample from; -1: the whole vocabulary
    min_new_tokens: int = 0
    # grounded answers: the answer mode, and how many evidence sentences the card shows
    answer_mode: AnswerMode = "grounded"
    evidence_sentences: int = 2
    # stop an answer that repeats a sentence of its own (``rag.repeats``)
    stop_repeats: bool = True

    def sampling(self, top_p: float) -> SamplingParams:
        """The engine's sampling parameters for a turn under these settings."""
        return SamplingParams(
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            top_p=top_p,
            top_k=self.sampling_top_k,
            min_p=self.min_p,
            frequency_penalty=self.frequency_penalty,
            presence_penalty=self.presence_penalty,
            repetition_penalty=self.repetition_penalty,
            min_new_tokens=self.min_new_tokens,
        )


MAX_SYSTEM_PROMPT_CHARS = 8000
MAX_TOP_K = 32
MAX_RIDERS = 32
MAX_EVIDENCE_SENTENCES = 5
# float settings: (low, high, low included); SGLang's SamplingParams.verify ranges
FLOAT_RANGES: dict[str, tuple[float, float, bool]] = {
    "temperature": (0.0, 2.0, True),
    "frequency_penalty": (-2.0, 2.0, True),
    "presence_penalty": (-2.0, 2.0, True),
    "repetition_penalty": (0.0, 2.0, False),
    "min_p": (0.0, 1.0, True),
}


def apply_changes(
    current: ChatSettings,
    changes: Mapping[str, Any],
    strategies: Sequence[str],
    max_new_tokens_cap: int,
) -> ChatSettings:
    """Validate ``changes`` against ``current`` and return the new settings (pure)."""
    known = {f.name for f in fields(ChatSettings)}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise SettingsError(f"unknown setting(s): {', '.join(unknown)}")
    out: dict[str, Any] = {}
    for key, value in changes.items():
        out[key] = _check(key, value, strategies, max_new_tokens_cap)
    after = replace(current, **out)
    if after.min_new_tokens > after.max_new_tokens:
        raise SettingsError(
            f"min_new_tokens: must not exceed max_new_tokens ({after.max_new_tokens})"
        )
    return after


def _float_in_range(key: str, value: Any) -> float:
    low, high, low_included = FLOAT_RANGES[key]
    number = float(value)
    if not (low <= number if low_included else low < number) or not number <= high:
        bracket = "[" if low_included else "("
        raise SettingsError(f"{key}: must be in {bracket}{low:g}, {high:g}]")
    return number


def _check(key: str, value: Any, strategies: Sequence[str], cap: int) -> Any:
    try:
        if key == "system_prompt":
            text = str(value).strip()
            if not text or len(text) > MAX_SYSTEM_PROMPT_CHARS:
                raise SettingsError(f"system_prompt: 1 to {MAX_SYSTEM_PROMPT_CHARS} characters")
            return text
        if key == "top_k":
            number = int(value)
            if not 1 <= number <= MAX_TOP_K:
                raise SettingsError(f"top_k: must be between 1 and {MAX_TOP_K}")
            return number
        if key == "riders":
            number = int(value)
            if not 0 <= number <= MAX_RIDERS:
                raise SettingsError(f"riders: must be between 0 and {MAX_RIDERS}")
            return number
        if key == "ordering":
            if value not in strategies:
                raise SettingsError(
                    f"ordering: {value!r} is not available; choose one of {', '.join(strategies)}"
                )
            return str(value)
        if key == "layout":
            if value not in LAYOUTS:
                raise SettingsError(f"layout: choose one of {', '.join(LAYOUTS)}")
            return str(value)
        if key in FLOAT_RANGES:
            return _float_in_range(key, value)
        if key == "stop_repeats":
            if not isinstance(value, bool):
                raise SettingsError("stop_repeats: must be true or false")
            return value
        if key == "answer_mode":
            if value not in ANSWER_MODES:
                raise SettingsError(f"answer_mode: choose one of {', '.join(ANSWER_MODES)}")
            return str(value)
        if key == "evidence_sentences":
            number = int(value)
            if not 0 <= number <= MAX_EVIDENCE_SENTENCES:
                raise SettingsError(
                    f"evidence_sentences: must be between 0 and {MAX_EVIDENCE_SENTENCES}"
                )
            return number
        if key == "sampling_top_k":
            number = int(value)
            if number != -1 and number < 1:
                raise SettingsError("sampling_top_k: must be -1 (off) or at least 1")
            return number
        if key == "min_new_tokens":
            number = int(value)
            if not 0 <= number <= cap:
                raise SettingsError(f"min_new_tokens: must be between 0 and {cap}")
            return number
        number = int(value)  # max_new_tokens
        if not 1 <= number <= cap:
            raise SettingsError(f"max_new_tokens: must be between 1 and {cap}")
        return number
    except (TypeError, ValueError) as exc:
        if isinstance(exc, SettingsError):
            raise
        raise SettingsError(f"{key}: {value!r} is not a valid value") from exc


class SettingsService:
    def __init__(
        self,
        db: Database,
        defaults: ChatSettings,
        strategies: Sequence[str],
        max_new_tokens_cap: int,
    ) -> None:
        self.db = db
        self.defaults = defaults
        self.strategies = list(strategies)
        self.max_new_tokens_cap = max_new_tokens_cap

    def current(self) -> ChatSettings:
        """The defaults overlaid with what admins have changed (stale or invalid rows, such as
        a strategy no longer installed, fall back to the default for that key)."""
        with self.db.session() as s:
            rows = {r.key: r.value for r in s.scalars(select(Setting))}
        settings = self.defaults
        for key, value in rows.items():
            try:
                settings = apply_changes(
                    settings, {key: value}, self.strategies, self.max_new_tokens_cap
                )
            except SettingsError:
                continue
        return settings

    def update(self, actor: str, changes: Mapping[str, Any]) -> ChatSettings:
        """Validate and store ``changes``; audit old and new values. Raises ``SettingsError``."""
        before = self.current()
        after = apply_changes(before, changes, self.strategies, self.max_new_tokens_cap)
        diff = {
            k: [v, asdict(after)[k]] for k, v in asdict(before).items() if asdict(after)[k] != v
        }
        if not diff:
            return after
        now = utcnow()
        with self.db.session() as s:
            for key, (_old, new) in diff.items():
                row = s.get(Setting, key)
                if row is None:
                    s.add(Setting(key=key, value=new, updated_at=now, updated_by=actor))
                else:
                    row.value, row.updated_at, row.updated_by = new, now, actor
            s.add(AuditEvent(actor=actor, action="settings.update", detail=diff))
        return after
