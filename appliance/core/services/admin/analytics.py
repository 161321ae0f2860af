"""Usage analytics: questions per day and per user, and the feedback ratio (read-only)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select

from appliance.core.db.models import Conversation, Feedback, Message, User
from appliance.core.db.session import Database


def _day(at: datetime) -> str:
    at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return at.astimezone(UTC).date().isoformat()


class Analytics:
    def __init__(self, db: Database) -> None:
        self.db = db

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
