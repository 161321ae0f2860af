"""Live chart data: a bounded time series of engine metrics, sampled in the background, and
the app's own per-turn records read from ``messages``."""

from __future__ import annotations

import logging
import threading
from collections import deque
from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from appliance.core.db.models import Message
from appliance.core.db.session import Database
from appliance.core.services.admin.series import (
    EngineSample,
    Turn,
    engine_sample,
    rolling_turn_stats,
)
from engine.base import Engine, EngineError

log = logging.getLogger(__name__)


class MetricsSampler:
    """Reads ``engine.metrics()`` every ``interval_s`` into a ring of ``capacity`` samples
    (default: one hour at 5 s). Thread-safe; ``start``/``stop`` own one daemon thread."""

    def __init__(
        self, engine: Engine, db: Database, interval_s: float = 5.0, capacity: int = 720
    ) -> None:
        self.engine = engine
        self.db = db
        self.interval_s = interval_s
        self._samples: deque[EngineSample] = deque(maxlen=capacity)
        self._previous: tuple[float, float] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error = ""

    def sample(self) -> EngineSample | None:
        """Take one sample now (None when the engine cannot be read; the reason is kept)."""
        try:
            metrics = self.engine.metrics()
        except EngineError as exc:
            self.last_error = str(exc)
            return None
        self.last_error = ""
        with self._lock:
            point, self._previous = engine_sample(datetime.now(UTC), metrics, self._previous)
            self._samples.append(point)
        return point

    def samples(self) -> list[EngineSample]:
        with self._lock:
            return list(self._samples)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="metrics-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception:  # a sampling bug must not kill the charts for good
                log.exception("metrics sample failed")
            self._stop.wait(self.interval_s)

    # ---- per-turn records -----------------------------------------------------------------

    def turns(self, minutes: float = 60, limit: int = 2000) -> list[Turn]:
        """Stored answers of the last ``minutes`` with their metrics, oldest first."""
        since = datetime.now(UTC) - timedelta(minutes=minutes)
        with self.db.session() as s:
            rows = s.execute(
                select(
                    Message.created_at,
                    Message.ttft_ms,
                    Message.prompt_tokens,
                    Message.cached_tokens,
                    Message.completion_tokens,
                    Message.e2e_ms,
                    Message.claims_total,
                    Message.claims_supported,
                    Message.predicted_cached,
                )
                .where(
                    Message.role == "assistant",
                    Message.created_at >= since,
                    Message.ttft_ms.is_not(None),
                )
                .order_by(Message.id.desc())
                .limit(limit)
            ).all()
        return [
            Turn(
                at=r[0] if r[0].tzinfo else r[0].replace(tzinfo=UTC),
                ttft_ms=float(r[1]),
                prompt_tokens=r[2] or 0,
                cached_tokens=r[3] or 0,
                completion_tokens=r[4] or 0,
                e2e_ms=float(r[5] or 0.0),
                claims_total=r[6] or 0,
                claims_supported=r[7] or 0,
                predicted_cached=r[8],
            )
            for r in reversed(rows)
        ]

    def turn_series(self, minutes: float = 60, window: int = 20) -> list[dict]:
        return rolling_turn_stats(self.turns(minutes), window)
