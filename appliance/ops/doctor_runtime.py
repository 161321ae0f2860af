"""Doctor checks of the running parts: the engine (a real 1-token generation), the web app,
the index files, and GPU memory headroom. Each returns a ``Check`` whose detail tells the
admin what to do; none raises."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from appliance.core.config import AppConfig
from engine.base import EngineError, Finished, GenerateRequest, SamplingParams

PROBE = "Reply with one word: ready?"


@dataclass(frozen=True)
class Check:
    """One finding: ``ok`` False fails the doctor; ``warn`` marks an ok-but-look finding."""

    name: str
    ok: bool
    detail: str
    warn: bool = False


def one_token(engine) -> str:  # noqa: ANN001
    """Generate one token; return a short timing string (raises EngineError on failure)."""
    started = time.perf_counter()
    request = GenerateRequest(prompt=PROBE, sampling=SamplingParams(max_new_tokens=1))
    stats = None
    for item in engine.generate(request):
        if isinstance(item, Finished):
            stats = item.stats
    if stats is None or stats.completion_tokens < 1:
        raise EngineError("the engine finished without generating a token")
    return f"1-token generation in {(time.perf_counter() - started) * 1000:.0f} ms"


def engine_check(config: AppConfig) -> Check:
    """A 1-token generation against the configured engine."""
    e = config.engine
    if e.backend == "sglang":
        from engine.sglang.client import SGLangEngine

        client = SGLangEngine(
            e.sglang_url, timeout_s=60, connect_retries=1, check_context=False, tokenizer=None
        )
        try:
            detail = one_token(client)
            return Check("engine", True, f"{e.sglang_url}: {detail}")
        except EngineError as exc:
            return Check(
                "engine",
                False,
                f"{e.sglang_url} cannot generate: {exc}. Check the engine service "
                "(systemctl status appliance-engine; journalctl -u appliance-engine)",
            )
        finally:
            client.close()
    from engine.embedded.model_store import DEFAULT_MODEL_NAME, is_prepared

    if not e.model_path and not is_prepared(config.paths.models_dir / DEFAULT_MODEL_NAME):
        return Check("engine", True, "skipped: the model is prepared on the first start", True)
    try:
        from appliance.wiring.appliance import build_engine

        engine = build_engine(config)
    except Exception as exc:  # a broken model dir or a missing package is a finding
        return Check("engine", False, f"cannot load the embedded engine: {exc}")
    try:
        info = engine.info()
        detail = f"embedded ({info.model}; {info.runtime}): {one_token(engine)}"
        missing = _native_kernels_missing(config, engine)
        if missing:
            detail += f"; the native kernels are off ({missing}): {NATIVE_HINT}"
        return Check("engine", True, detail, warn=bool(missing))
    except EngineError as exc:
        return Check("engine", False, f"the embedded engine cannot generate: {exc}")
    finally:
        engine.close()


NATIVE_HINT = (
    "install a C compiler (apt-get install gcc) and restart the engine for ~25% faster "
    "prefill and decode"
)


def _native_kernels_missing(config: AppConfig, engine) -> str:  # noqa: ANN001
    """Why this CPU could run the native kernels but the engine does not, or ''."""
    from engine.embedded.native import unsupported_reason

    if not config.engine.native_attention or getattr(engine, "attention", "") != "pytorch":
        return ""
    if str(engine.info().dtype) != "bfloat16":
        return ""  # the kernels are bfloat16 only: float32 is the portable path
    reason = unsupported_reason()
    if reason is None:
        return "the kernel build failed; see the engine log"
    return reason if "compiler" in reason else ""


def app_check(config: AppConfig) -> Check:
    """The web app's /health, when it is serving (a warning, not a failure, when it is not)."""
    import httpx

    host = "127.0.0.1" if config.server.host in ("0.0.0.0", "::") else config.server.host
    url = f"http://{host}:{config.server.port}/health"
    try:
        response = httpx.get(url, timeout=10)
    except httpx.HTTPError:
        return Check("app", True, f"not serving at {url} (start it: appliance serve)", True)
    if response.status_code == 200:
        return Check("app", True, f"{url}: ok")
    return Check(
        "app",
        False,
        f"{url} answers {response.status_code} {response.text[:120]}: the app cannot reach "
        "its engine; see the engine check",
    )


def index_check(config: AppConfig) -> Check:
    """The index files are readable and hold as many live vectors as the DB has chunks."""
    from rag.bm25 import BM25_FILE
    from rag.embeddings import embedder_dim, embedder_name
    from rag.index import INDEX_FILE, MANIFEST_FILE
    from rag.index_embedder import embedder_of, is_other

    directory = config.paths.index_dir
    chunks = _chunk_count(config)
    manifest_path = directory / MANIFEST_FILE
    if not manifest_path.is_file():
        if chunks:
            return Check(
                "index",
                True,
                f"{directory} is empty but the database has {chunks} chunks: the next start "
                "rebuilds it (re-embeds every chunk)",
                True,
            )
        return Check("index", True, "empty (no documents yet)")
    try:
        import faiss

        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if not isinstance(manifest, dict):
            raise ValueError("the manifest is not a JSON object")
        loaded = faiss.read_index(str(directory / INDEX_FILE))
        live = int(loaded.ntotal) - int(manifest.get("tombstones", 0))
    except (OSError, ValueError, RuntimeError) as exc:
        return Check(
            "index",
            False,
            f"{directory} is unreadable ({exc}): stop the app, move the directory away; the "
            "next start rebuilds it from the database",
        )
    if not (directory / BM25_FILE).is_file():
        return Check("index", True, f"{BM25_FILE} missing: the next start rebuilds it", True)
    detail = f"{live} vectors ({manifest.get('kind')}, {manifest.get('model')})"
    model_path = config.rag.embedding_model_path
    wanted, width = embedder_name(model_path), embedder_dim(model_path)
    if live and is_other(embedder_of(manifest), wanted, width):
        return Check(
            "index",
            False,
            f"{detail}, dim {manifest.get('dim')}, but rag.embedding_model_path is {wanted!r}"
            f"{f' (dim {width})' if width else ''}: the app refuses to mix two embedders' "
            "vectors; run `appliance ingest --reindex` (or set the path back)",
        )
    if chunks is not None and live != chunks:
        return Check(
            "index", True, f"{detail} vs {chunks} chunks: the next start reconciles them", True
        )
    return Check("index", True, detail)


def _chunk_count(config: AppConfig) -> int | None:
    from sqlalchemy import func, select

    from appliance.core.db.models import Chunk
    from appliance.core.db.session import Database

    try:
        db = Database(config.database_url)
        try:
            with db.session() as s:
                return int(s.scalar(select(func.count(Chunk.id))) or 0)
        finally:
            db.dispose()
    except Exception:  # the database check reports database problems
        return None


def gpu_headroom(gpus: Sequence, profile: str) -> Check:
    """Free memory per GPU against the card's start-up headroom (pure: GPUs in, verdict out)."""
    from engine.sglang.gpu_info import match_profile

    if not gpus:
        if profile == "cpu":
            return Check("gpu", True, "no NVIDIA GPU (cpu profile)")
        return Check(
            "gpu",
            False,
            f"profile {profile} but nvidia-smi shows no GPU: install or repair the NVIDIA "
            "driver (nvidia-smi must work), then rerun",
        )
    short = []
    parts = []
    for gpu in gpus:
        free_gib = (gpu.memory_total_mib - gpu.memory_used_mib) / 1024
        need = match_profile(gpu.name).headroom_gib
        parts.append(f"GPU{gpu.index} {free_gib:.1f} GiB free")
        if free_gib < need:
            short.append(f"GPU{gpu.index} has {free_gib:.1f} GiB free (< {need:g} GiB)")
    if short:
        return Check(
            "gpu",
            False,
            "; ".join(short) + ": long contexts will run out of memory. Stop other GPU "
            "processes (nvidia-smi), or lower --mem-fraction-static in the engine unit",
        )
    return Check("gpu", True, ", ".join(parts))


def gpu_check(config: AppConfig, read: Callable[[], list] | None = None) -> Check:
    from engine.sglang.gpu_info import read_gpus

    try:
        gpus = (read or read_gpus)()
    except ValueError as exc:
        return Check("gpu", False, f"cannot parse nvidia-smi: {exc}")
    return gpu_headroom(gpus, config.profile)
