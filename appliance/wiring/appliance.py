"""The composition root's first half: ``build_appliance(config)`` starts the core in order
(database, auth, engine, index, ingest, ordering, settings, chat). ``wiring.web`` serves it.

Nothing happens at import; everything starts here, in order.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from appliance.core.auth.service import AuthService, generate_password
from appliance.core.config import SAMPLE_CORPUS, AppConfig, ConfigError
from appliance.core.db.session import Database
from appliance.core.metrics import AppMetrics
from appliance.core.services.admin import AdminConsole, build_admin
from appliance.core.services.chat import ChatService
from appliance.core.services.directory_settings import DirectorySettingsStore
from appliance.core.services.grounding import default_answer_mode
from appliance.core.services.ingest import IngestService
from appliance.core.services.knowledge import KnowledgeBase, Progress
from appliance.core.services.ocr import ocr_settings
from appliance.core.services.settings import ChatSettings, SettingsService
from appliance.wiring.auth import build_auth, directory_settings
from engine.base import Engine
from rag.boilerplate import RepeatRule
from rag.chunk_budget import ChunkBudget
from rag.embeddings import Embedder
from rag.index_embedder import EmbedderMismatch
from rag.ordering import ContextOrdering, default_ordering

if TYPE_CHECKING:  # the embedded engine is imported only where it runs
    from engine.embedded.speculative import SpeculativeConfig

log = logging.getLogger(__name__)


@dataclass
class Appliance:
    config: AppConfig
    db: Database
    auth: AuthService
    engine: Engine
    knowledge: KnowledgeBase
    ingest: IngestService
    settings: SettingsService
    ordering: ContextOrdering
    chat: ChatService
    first_admin_password: str | None = None
    # the company directory's settings in force (the admin console changes them)
    directory: DirectorySettingsStore | None = None
    # stopped by close(), before the engine and the database (e.g. the admin metrics sampler)
    on_close: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        for stop in self.on_close:
            stop()
        self.engine.close()
        self.db.dispose()


def build_engine(config: AppConfig) -> Engine:
    """The SGLang client (any profile) or the embedded CPU engine (profile 'cpu' only)."""
    e = config.engine
    if e.backend == "sglang":
        from engine.sglang.client import SGLangEngine

        return SGLangEngine(
            e.sglang_url,
            timeout_s=e.request_timeout_s,
            tokenizer=e.model_path or None,
            profile=config.profile,
            # behind the gateway: healthy while it has a healthy worker to send a request to
            health_path="/readiness" if e.sglang_worker_urls else "/health",
        )
    if config.profile != "cpu" or e.backend != "embedded":
        raise ConfigError(
            f"config error: profile {config.profile!r} with engine.backend "
            f"{e.backend!r} is not yet supported; use the 'sglang' backend on a GPU "
            "profile, or profile 'cpu' with the 'embedded' backend"
        )
    from engine.embedded.engine import EmbeddedEngine
    from engine.embedded.model_store import resolve_model_dir
    from engine.embedded.omp import run_in_own_thread

    # a first start converts the bundled model: OpenMP work, kept off this thread (omp.py)
    model_dir = run_in_own_thread(lambda: resolve_model_dir(e.model_path, config.paths.models_dir))
    return EmbeddedEngine(
        model_dir,
        dtype=e.dtype,
        kv_budget_tokens=e.kv_budget_tokens,
        max_queue=e.max_queue,
        max_running=e.max_running_requests,
        threads=e.threads,
        profile=config.profile,
        native_attention=e.native_attention,
        kernel_dir=config.paths.kernels_dir,
        speculative=embedded_speculation(config),
    )


def embedded_speculation(config: AppConfig) -> SpeculativeConfig:
    """The embedded engine's speculative decoding from ``engine.speculative_*``."""
    from engine.embedded.speculative import speculative_config

    e = config.engine
    return speculative_config(
        e.speculative_algorithm,
        e.speculative_num_draft_tokens,
        e.speculative_ngram_min,
        e.speculative_ngram_max,
        e.speculative_max_step_drafts,
        e.speculative_pool_tokens,
    )


def open_database(config: AppConfig) -> Database:
    config.paths.data_dir.mkdir(parents=True, exist_ok=True)
    db = Database(config.database_url, echo=config.database.echo)
    db.migrate()
    return db


def open_knowledge(
    config: AppConfig,
    db: Database,
    embedder: Embedder,
    rebuild: bool = False,
    progress: Progress | None = None,
) -> KnowledgeBase:
    """The knowledge base, in step with the database: reconciled, or with every chunk embedded
    anew when ``rebuild``. An index built by another embedder is a config error that says how
    to switch (its vectors stay as they are until a rebuild replaces them)."""
    try:
        knowledge = KnowledgeBase(db, embedder, config.paths.index_dir, rebuild=rebuild)
        knowledge.use_neighbours(config.rag.neighbour_chunks)
    except EmbedderMismatch as exc:
        raise ConfigError(
            f"config error: rag.embedding_model_path: {exc}. Run `appliance ingest --reindex` "
            f"to embed every chunk again with {exc.model!r}, or set rag.embedding_model_path "
            "back to the index's embedder"
        ) from exc
    if rebuild:
        knowledge.reindex(progress=progress)
        return knowledge
    added, removed = knowledge.reconcile(progress=progress)
    if added or removed:
        log.info("index reconciled with the database: %d added, %d removed", added, removed)
    return knowledge


def build_embedder(config: AppConfig) -> Embedder:
    """The configured embedder, loaded on a short-lived thread and running every call on one
    too: no OpenMP team is left on a long-lived thread beside the engine's (``omp.py``)."""
    from engine.embedded.omp import run_in_own_thread

    runner = functools.partial(run_in_own_thread, name="embed")
    path = config.rag.embedding_model_path
    return run_in_own_thread(lambda: Embedder(path, runner=runner), name="embedder-load")


def reindex_knowledge(
    config: AppConfig, embedder: Embedder | None = None, progress: Progress | None = None
) -> int:
    """Embed every chunk again with the configured embedder (the way to switch embedders);
    the number of chunks. Needs neither the engine nor a running appliance."""
    db = open_database(config)
    try:
        embedder = embedder or build_embedder(config)
        return open_knowledge(config, db, embedder, rebuild=True, progress=progress).index.size
    finally:
        db.dispose()


def bootstrap_admin(config: AppConfig, auth: AuthService) -> str | None:
    """Create the first admin with a generated password; return it (to show once) or None."""
    if auth.has_admin():
        return None
    password = generate_password()
    auth.create_user(config.bootstrap.admin_username, password, role="admin")
    return password


def build_appliance(
    config: AppConfig, engine: Engine | None = None, embedder: Embedder | None = None
) -> Appliance:
    """Start every part in order. ``engine`` and ``embedder`` let tests share loaded models."""
    db = open_database(config)
    directory = directory_settings(config, db)
    auth = build_auth(config, db, directory)
    password = bootstrap_admin(config, auth)
    engine = engine or build_engine(config)
    embedder = embedder or build_embedder(config)
    knowledge = open_knowledge(config, db, embedder)
    ingest = IngestService(
        db,
        knowledge,
        engine.count_tokens,
        config.rag.chunk_tokens,
        config.rag.chunk_overlap_tokens,
        config.rag.max_upload_mb * 1024 * 1024,
        ocr=ocr_settings(config.rag),
        budget=ChunkBudget.from_chars(
            config.rag.chunk_chars, config.rag.chunk_overlap_chars, config.rag.chunk_floor_chars
        ),
        repeats=RepeatRule(config.rag.repeat_min_docs, config.rag.repeat_min_share),
    )
    if config.bootstrap.ingest_sample_corpus and ingest.document_count() == 0:
        results = ingest.ingest_folder(SAMPLE_CORPUS)
        log.info("sample corpus: %d documents indexed", sum(r.status == "indexed" for r in results))
    # the shadow models the engine's cache; behind a gateway (worker URLs given), each
    # worker's cache, followed through the worker the gateway names for each answer
    ordering = default_ordering(
        config.engine.kv_budget_tokens, workers=config.engine.sglang_worker_urls
    )
    if config.rag.ordering not in ordering.names():
        raise ConfigError(
            f"config error: rag.ordering: {config.rag.ordering!r} is not available here; "
            f"choose one of {', '.join(ordering.names())}"
        )
    if config.chat.min_new_tokens > config.engine.max_new_tokens:
        raise ConfigError(
            "config error: chat.min_new_tokens: must not exceed engine.max_new_tokens "
            f"({config.engine.max_new_tokens})"
        )
    settings = SettingsService(
        db,
        ChatSettings(
            system_prompt=config.chat.system_prompt,
            top_k=config.rag.top_k,
            ordering=config.rag.ordering,
            riders=config.rag.riders,
            layout=config.rag.layout,
            temperature=config.chat.temperature,
            max_new_tokens=config.engine.max_new_tokens,
            frequency_penalty=config.chat.frequency_penalty,
            presence_penalty=config.chat.presence_penalty,
            repetition_penalty=config.chat.repetition_penalty,
            min_p=config.chat.min_p,
            sampling_top_k=config.chat.sampling_top_k,
            min_new_tokens=config.chat.min_new_tokens,
            answer_mode=config.chat.answer_mode or default_answer_mode(config.profile),
            evidence_sentences=config.chat.evidence_sentences,
            stop_repeats=config.chat.stop_repeats,
        ),
        strategies=ordering.names(),
        max_new_tokens_cap=8192,
    )
    chat = ChatService(
        db,
        knowledge,
        engine,
        config.chat,
        settings,
        ordering,
        metrics=AppMetrics(engine),
        model_languages=config.engine.written_languages(),
    )
    return Appliance(
        config, db, auth, engine, knowledge, ingest, settings, ordering, chat, password, directory
    )


def build_console(appliance: Appliance, sample_interval_s: float = 5.0) -> AdminConsole:
    """The admin console's services over a built appliance (its sampler not yet started)."""
    a = appliance
    return build_admin(
        a.config,
        a.db,
        a.auth,
        a.engine,
        a.knowledge,
        a.ingest,
        a.settings,
        sample_interval_s,
        a.directory,
    )
