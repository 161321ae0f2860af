"""Usage analytics: questions per day and per user, the feedback ratio, and goodput with the
cost per effective token (read-only)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select

from appliance.core.config import SloConfig
from appliance.core.db.models import Conversation, Feedback, Message, User
from appliance.core.db.session import Database


def _day(at: datetime) -> str:
    at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return at.astimezone(UTC).date().isoformat()


class Analytics:
    def __init__(self, db: Database, slo: SloConfig | None = None) -> None:
        self.db = db
        self.slo = slo or SloConfig()

    def goodput(self, hours: float = 24.0) -> dict:
        """Over the stored answers of the last ``hours``: the output tokens of those that met
        the latency objective (TTFT and mean inter-token time), and the cost per million of
        them (the machine-hour price times the window, over the good tokens; None without a
        price or good tokens). Answers without timings (extractive ones) are left out."""
        since = datetime.now(UTC) - timedelta(hours=hours)
        with self.db.session() as s:
            rows = s.execute(
                select(Message.completion_tokens, Message.ttft_ms, Message.e2e_ms).where(
                    Message.role == "assistant",
                    Message.created_at >= since,
                    Message.completion_tokens > 0,
                    Message.ttft_ms.is_not(None),
                    Message.e2e_ms.is_not(None),
                )
            ).all()
        good = total = met = 0
        for tokens, ttft_ms, e2e_ms in rows:
            total += tokens
            itl_s = (e2e_ms - ttft_ms) / 1000 / (tokens - 1) if tokens > 1 else 0.0
            if ttft_ms / 1000 <= self.slo.ttft_s and itl_s <= self.slo.itl_s:
                good += tokens
                met += 1
        price = self.slo.machine_hour_price
        cost = price * hours / good * 1e6 if price and good else None
        return {
            "hours": hours,
            "answers": len(rows),
            "answers_met": met,
            "output_tokens": total,
            "good_tokens": good,
            "cost_per_million": cost,
            "slo_ttft_s": self.slo.ttft_s,
            "slo_itl_s": self.slo.itl_s,
        }

    def questions_per_day(self, days: int = 30) -> list[dict]:
        """One row per day (UTC) in the window, zero days included, oldest first."""
        days = max(1, int(days))
        today = datetime.now(UTC).date()
        since = datetime.combine(today - timedelta(days=days - 1), datetime.min.time(), UTC)
        with self.db.session() as s:
            stamps = s.scalars(
                select(Message.created_at).where(
                    Message.role == "user", Message.created_at >= since
                )
            ).all()
        counts = Counter(_day(at) for at in stamps)
        out = []
        for i in range(days):
            day = (today - timedelta(days=days - 1 - i)).isoformat()
            out.append({"day": day, "questions": counts.get(day, 0)})
        return out

    def questions_per_user(self, days: int = 30) -> list[dict]:
        since = datetime.now(UTC) - timedelta(days=max(1, int(days)))
        with self.db.session() as s:
            rows = s.execute(
                select(User.username, func.count(Message.id))
                .join(Conversation, Conversation.user_id == User.id)
                .join(Message, Message.conversation_id == Conversation.id)
                .where(Message.role == "user", Message.created_at >= since)
                .group_by(User.username)
                .order_by(func.count(Message.id).desc(), User.username)
            ).all()
        return [{"user": name, "questions": n} for name, n in rows]

    def feedback(self) -> dict:
        """Thumbs up and down over all answers, and the share of ups (None without votes)."""
        with self.db.session() as s:
            query = select(Feedback.rating, func.count(Feedback.id)).group_by(Feedback.rating)
            rows = dict(s.execute(query).all())
        up, down = rows.get(1, 0), rows.get(-1, 0)
        total = up + down
        return {"up": up, "down": down, "ratio": (up / total) if total else None}
