"""The database on both backends: migrations, users with hashed passwords, turns with metrics."""

from __future__ import annotations

from alembic.script import ScriptDirectory
from sqlalchemy import func, inspect, select

from appliance.core.auth.service import AuthService
from appliance.core.db.models import AuditEvent, Conversation, Message, User
from appliance.core.db.session import MIGRATIONS_DIR, Database, current_revision

TABLES = {
    "users",
    "auth_sessions",
    "conversations",
    "messages",
    "documents",
    "chunks",
    "audit_events",
}


def test_migrations_create_the_schema_and_are_idempotent(db_url: str) -> None:
    db = Database(db_url)
    try:
        assert current_revision(db.engine) is None
        db.migrate()
        head = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
        assert current_revision(db.engine) == head
        assert set(inspect(db.engine).get_table_names()) >= TABLES
        columns = {c["name"] for c in inspect(db.engine).get_columns("messages")}
        assert {"ttft_ms", "prompt_tokens", "cached_tokens", "completion_tokens"} <= columns
        assert "retrieval_ms" in columns
        db.migrate()  # a second run changes nothing
        assert current_revision(db.engine) == head
    finally:
        db.dispose()


def test_users_sessions_and_turns(db_url: str) -> None:
    db = Database(db_url)
    db.migrate()
    try:
        auth = AuthService(db, session_ttl_hours=1)
        alice = auth.create_user("alice", "correct horse battery", role="staff")
        with db.session() as s:
            stored = s.scalar(select(User.password_hash).where(User.username == "alice"))
        assert stored.startswith("$argon2") and "correct horse" not in stored
        assert auth.authenticate("alice", "wrong password") is None
        assert auth.authenticate("alice", "correct horse battery") == alice
        result = auth.login("alice", "correct horse battery")
        token = result.token
        assert result.principal == alice and auth.resolve(token) == alice
        auth.logout(token)
        assert auth.resolve(token) is None

        with db.session() as s:
            conv = Conversation(user_id=alice.user_id, title="VPN")
            conv.messages = [
                Message(role="user", content="How do I reset my VPN password?"),
                Message(
                    role="assistant",
                    content="Use the portal [1].",
                    citations=[{"number": 1, "chunk_id": 7}],
                    prompt_tokens=900,
                    cached_tokens=850,
                    completion_tokens=12,
                    ttft_ms=120.5,
                    e2e_ms=900.0,
                    retrieval_ms=8.2,
                    finish_reason="stop",
                ),
            ]
            s.add(conv)
        with db.session() as s:
            conv = s.scalar(select(Conversation).where(Conversation.user_id == alice.user_id))
            reply = conv.messages[1]
            assert (reply.prompt_tokens, reply.cached_tokens, reply.ttft_ms) == (900, 850, 120.5)
            assert reply.citations == [{"number": 1, "chunk_id": 7}]
            actions = set(s.scalars(select(AuditEvent.action)))
            assert {"user.create", "login.ok", "login.failed", "logout"} <= actions
            s.delete(s.get(User, alice.user_id))
        with db.session() as s:  # deleting a user removes their conversations and messages
            assert s.scalar(select(func.count(Message.id))) == 0
    finally:
        db.dispose()
