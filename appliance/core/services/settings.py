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


MAX_SYSTEM_PROMPT_CHARS = 8000
MAX_TOP_K = 32
MAX_RIDERS = 32


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
    return replace(current, **out)


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
        if key == "temperature":
            number = float(value)
            if not 0.0 <= number <= 2.0:
                raise SettingsError("temperature: must be between 0 and 2")
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
