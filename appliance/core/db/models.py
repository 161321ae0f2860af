"""SQLAlchemy 2 ORM models. The schema itself is owned by the Alembic migrations."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    pass


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(16), default="staff")  # staff | admin
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # where the account lives: local (a password here), ldap or oidc (the company directory;
    # no password is stored, ``password_hash`` holds an unusable marker)
    source: Mapped[str] = mapped_column(String(16), default="local", server_default="local")
    # the directory's id for the account: the LDAP DN, or "<issuer> <subject>" for OIDC
    external_id: Mapped[str | None] = mapped_column(String(512), nullable=True)
    # when the directory last confirmed the account (sign-in or account check)
    confirmed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class UserCollection(Base):
    """A collection a staff user may retrieve from (admins may retrieve from every one)."""

    __tablename__ = "user_collections"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    collection: Mapped[str] = mapped_column(String(64), primary_key=True)


class AuthSession(Base):
    """A login session. Only a hash of the bearer token is stored."""

    __tablename__ = "auth_sessions"

    id: Mapped[int] = mapped_column(primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class Conversation(Base):
    __tablename__ = "conversations"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    title: Mapped[str] = mapped_column(String(200), default="New chat")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    messages: Mapped[list[Message]] = relationship(
        back_populates="conversation", order_by="Message.id", cascade="all, delete-orphan"
    )


class Message(Base):
    """One message. Assistant messages carry the turn's metrics and citations."""

    __tablename__ = "messages"

    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    role: Mapped[str] = mapped_column(String(16))  # user | assistant
    content: Mapped[str] = mapped_column(Text)
    # The exact text this message contributed to the prompt (documents + question for a
    # user turn). Kept so later turns can replay history byte-identically.
    prompt_text: Mapped[str | None] = mapped_column(Text, nullable=True)
    # user turns: how the turn was laid out (``appliance.core.services.turn_history``: the
    # layout, the hint and question, a re-lay's document block, the chunks it rendered), so
    # that later turns rebuild the prompt as it was sent; null for turns stored before
    # layouts (appended, their chunks told by the answer's citations)
    prompt_parts: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    citations: Mapped[list | None] = mapped_column(JSON, nullable=True)
    finish_reason: Mapped[str | None] = mapped_column(String(32), nullable=True)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    cached_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    completion_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    ttft_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    e2e_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    retrieval_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    # the context-ordering strategy that laid out this answer's documents, the prompt layout
    # it was sent with (``rag.layout``), and the cached tokens the cache shadow predicted for
    # it before it was sent (against the engine's ``cached_tokens``)
    ordering: Mapped[str | None] = mapped_column(String(32), nullable=True)
    layout: Mapped[str | None] = mapped_column(String(16), nullable=True)
    predicted_cached: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # grounded answers (assistant messages): the "From the documents" card shown before the
    # generated text, each answer sentence's verdict, the mode that produced the answer, and the
    # counts the admin charts read (claims: sentences that state something checkable)
    evidence: Mapped[list | None] = mapped_column(JSON, nullable=True)
    verdicts: Mapped[list | None] = mapped_column(JSON, nullable=True)
    answer_mode: Mapped[str | None] = mapped_column(String(16), nullable=True)
    claims_total: Mapped[int | None] = mapped_column(Integer, nullable=True)
    claims_supported: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    conversation: Mapped[Conversation] = relationship(back_populates="messages")


class Document(Base):
    __tablename__ = "documents"
    __table_args__ = (UniqueConstraint("collection", "sha256", name="uq_documents_hash"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    collection: Mapped[str] = mapped_column(String(64), default="default", index=True)
    title: Mapped[str] = mapped_column(String(300))
    source_path: Mapped[str] = mapped_column(String(1000))
    # the uploaded name as given, where it differs from ``source_path`` (normalised:
    # ``appliance.core.names.stored_filename``); for display only
    original_name: Mapped[str | None] = mapped_column(String(1000), nullable=True)
    mime: Mapped[str] = mapped_column(String(64))
    sha256: Mapped[str] = mapped_column(String(64))
    size_bytes: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default="indexed")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    chunks: Mapped[list[Chunk]] = relationship(
        back_populates="document", order_by="Chunk.ordinal", cascade="all, delete-orphan"
    )


class Chunk(Base):
    """A chunk of a document. Its primary key is also its FAISS vector id."""

    __tablename__ = "chunks"
    __table_args__ = (Index("ix_chunks_document_ordinal", "document_id", "ordinal"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"))
    ordinal: Mapped[int] = mapped_column(Integer)
    section: Mapped[str] = mapped_column(String(300), default="")
    page: Mapped[int | None] = mapped_column(Integer, nullable=True)
    text: Mapped[str] = mapped_column(Text)
    token_count: Mapped[int] = mapped_column(Integer)
    # 0..1: the mean word confidence of OCR when the chunk's text was read from an image
    ocr_confidence: Mapped[float | None] = mapped_column(Float, nullable=True)

    document: Mapped[Document] = relationship(back_populates="chunks")


class AuditEvent(Base):
    __tablename__ = "audit_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    actor: Mapped[str] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(64), index=True)
    detail: Mapped[dict | None] = mapped_column(JSON, nullable=True)


class LoginCounter(Base):
    """Failed password checks of one (username, client address) pair (``scope`` "pair") or of
    one address for any usernames (``scope`` "address", ``username`` empty), counted by
    ``appliance.core.auth.throttle``; ``last_at`` is the latest counted check."""

    __tablename__ = "login_counters"

    scope: Mapped[str] = mapped_column(String(8), primary_key=True)
    address: Mapped[str] = mapped_column(String(64), primary_key=True)
    username: Mapped[str] = mapped_column(String(64), primary_key=True)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    last_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)


class ApiKey(Base):
    """A per-user key for the OpenAI-compatible API. Only a hash of the key is stored."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))  # shown to tell keys apart
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Feedback(Base):
    """A thumbs up (+1) or down (-1) on an answer, with an optional comment; one per user."""

    __tablename__ = "feedback"
    __table_args__ = (UniqueConstraint("message_id", "user_id", name="uq_feedback_message_user"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    message_id: Mapped[int] = mapped_column(ForeignKey("messages.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    rating: Mapped[int] = mapped_column(Integer)
    comment: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Setting(Base):
    """A runtime setting changed from the admin console (overrides the config default)."""

    __tablename__ = "settings"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[object] = mapped_column(JSON, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_by: Mapped[str] = mapped_column(String(64))


class IngestionRun(Base):
    """One file's ingestion attempt, kept for the admin console's history."""

    __tablename__ = "ingestion_runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    actor: Mapped[str] = mapped_column(String(64))
    filename: Mapped[str] = mapped_column(String(300))
    collection: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))  # indexed | unchanged | updated | failed
    document_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    chunks: Mapped[int] = mapped_column(Integer, default=0)
    size_bytes: Mapped[int] = mapped_column(Integer, default=0)
    duration_ms: Mapped[float] = mapped_column(Float, default=0.0)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
