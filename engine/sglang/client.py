"""``SGLangEngine``: the ``engine.base.Engine`` contract over SGLang's native HTTP API.

``generate`` posts ``/generate`` with ``stream: true`` and diffs the cumulative ``text`` of each
``data:`` line into ``TextDelta`` items, then yields one ``Finished`` from the last
``meta_info``. It sends the request and reads the status line and headers before it
returns, so busy (503/429), too-long and invalid (400) requests raise eagerly. The sampling
parameters (penalties, ``top_k``, ``min_p``, ``min_new_tokens`` included) go out under
SGLang's names; values SGLang would refuse are refused here first, in its words.
Closing the returned stream early closes the response and posts ``/abort_request``.

``ttft_s`` is measured here (send to first non-empty delta); ``e2e_s`` is the server's
``e2e_latency`` (client-measured when absent), and ``ttft_s`` is capped at it.
``check_context`` refuses a prompt over the context window locally (SGLang itself reports it
in the first ``data:`` line of a 200 answer: that error is raised by the first ``next()``).

Tokens (``count_tokens``, ``encode``, ``render_chat``) need a local Hugging Face tokenizer:
``tokenizer`` (a path loaded lazily with ``AutoTokenizer``, or a tokenizer object), else the
``tokenizer_path`` that ``/get_model_info`` reports, when that path exists on this box.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from engine.base import (
    EngineError,
    EngineInfo,
    EngineUnavailable,
    GenerateRequest,
    InvalidRequest,
    PromptTooLong,
    StreamItem,
    sampling_problem,
)
from engine.sglang.client_stream import (
    SGLangStream,
    classify,
    error_message,
    events,
    generate_body,
)
from engine.sglang.metrics_scrape import contract_metrics
from engine.token_bytes import TokenDecoder


class SGLangEngine:
    """Implements ``engine.base.Engine`` as a client of a running SGLang server."""

    supports_json_schema = True

    def __init__(
        self,
        base_url: str,
        *,
        model_name: str | None = None,
        timeout_s: float = 120.0,
        connect_retries: int = 3,
        retry_backoff_s: float = 0.5,
        tokenizer: Any = None,
        profile: str = "gpu",
        check_context: bool = True,
        health_path: str = "/health",
    ) -> None:
        """``health_path``: ``/readiness`` in front of the model gateway, whose ``/health``
        says only that the gateway itself runs (200 with every worker down)."""
        self.base_url = base_url.rstrip("/")
        self.model_name = model_name
        self.profile = profile
        self.check_context = check_context
        self.health_path = health_path
        self._context_length: int | None = None
        self.connect_retries = connect_retries
        self.retry_backoff_s = retry_backoff_s
        timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0))
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout)
        self._tokenizer_spec = tokenizer
        self._tokenizer: Any = None if isinstance(tokenizer, str | Path | None) else tokenizer
        self._lock = threading.Lock()
        self._tokens: TokenDecoder | None = None  # tokens' own texts and bytes, once asked
        self._info: EngineInfo | None = None  # the server's, once read

    # ---- generation -----------------------------------------------------------------------

    def generate(self, request: GenerateRequest) -> Iterator[StreamItem]:
        problem = sampling_problem(request.sampling)  # what SGLang would answer with a 400
        if problem:
            raise InvalidRequest(problem)
        rid = request.request_id or uuid.uuid4().hex
        body = generate_body(request, rid, self.render_chat)
        if self.check_context:
            self._check_context(body)
        started = time.perf_counter()
        response = self._send(self._http.build_request("POST", "/generate", json=body))
        if response.status_code != 200:
            try:
                response.read()
            finally:
                response.close()
            retry_after = response.headers.get("Retry-After")
            raise classify(response.status_code, error_message(response), retry_after)
        return SGLangStream(events(response), response, rid, started, on_abort=self.abort)

    def _check_context(self, body: dict[str, Any]) -> None:
        """Refuse a prompt over the context window here, before sending it: a streamed SGLang
        request reports that only in its first ``data:`` line. Skipped without a tokenizer."""
        try:
            ids = body.get("input_ids")
            n = len(ids) if ids is not None else self.count_tokens(body["text"])
            if self._context_length is None:
                self._context_length = self.info().context_length
        except EngineUnavailable:
            raise
        except EngineError:
            return
        if self._context_length and n >= self._context_length:
            raise PromptTooLong(
                f"prompt is {n} tokens; the model's context window is {self._context_length} tokens"
            )

    def _send(self, req: httpx.Request) -> httpx.Response:
        """Send (streamed), retrying refused connections with exponential backoff."""
        for attempt in range(self.connect_retries + 1):
            try:
                return self._http.send(req, stream=True)
            except httpx.ConnectError as exc:
                if attempt == self.connect_retries:
                    raise EngineUnavailable(f"SGLang at {self.base_url} refused: {exc}") from exc
                time.sleep(self.retry_backoff_s * 2**attempt)
            except httpx.TimeoutException as exc:
                raise EngineUnavailable(f"SGLang at {self.base_url} timed out: {exc}") from exc
            except httpx.TransportError as exc:
                raise EngineUnavailable(f"SGLang at {self.base_url}: {exc}") from exc
        raise AssertionError("unreachable")

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = self._send(self._http.build_request(method, path, **kwargs))
        try:
            response.read()
        except httpx.HTTPError as exc:
            raise EngineUnavailable(f"{method} {path}: {exc}") from exc
        finally:
            response.close()
        return response

    def _json(self, path: str) -> dict[str, Any]:
        response = self._call("GET", path)
        if response.status_code != 200:
            raise EngineError(f"GET {path}: HTTP {response.status_code}: {error_message(response)}")
        body = response.json()
        return body if isinstance(body, dict) else {}

    # ---- control ------------------------------------------------------------------------

    def abort(self, request_id: str) -> bool:
        try:
            response = self._call("POST", "/abort_request", json={"rid": request_id})
        except EngineError:
            return False
        if response.status_code != 200:
            return False
        try:
            body = response.json()
        except ValueError:
            return True  # SGLang answers an empty 200
        return bool(body.get("aborted", True)) if isinstance(body, dict) else True

    def health(self) -> bool:
        try:
            return self._http.get(self.health_path).status_code == 200
        except httpx.HTTPError:
            return False

    def info(self) -> EngineInfo:
        """What the server runs, asked once and then remembered (it does not change while the
        server runs). Behind the model gateway these calls go to any worker, and one that just
        died answers 500 until the gateway's health check notices; a turn must not fail on
        that while a live worker can answer it."""
        with self._lock:
            if self._info is not None:
                return self._info
        info = self._read_info()
        with self._lock:
            self._info = info
        return info

    def _read_info(self) -> EngineInfo:
        model = self._json("/get_model_info")
        server = self._json("/get_server_info")
        context = server.get("context_length") or model.get("context_length")
        if not context:
            context = self._config_context_length(model.get("model_path"))
        name = self.model_name or server.get("served_model_name") or model.get("model_path", "")
        return EngineInfo(
            backend="sglang",
            model=Path(str(name)).name or str(name),
            context_length=int(context or 0),
            profile=self.profile,
            dtype=str(server.get("dtype", "auto")),
            # ``page_size`` is null when SGLang picks its attention backend's default (1)
            cache_page_tokens=int(server.get("page_size") or 1),
        )

    def metrics(self) -> dict[str, float]:
        response = self._call("GET", "/metrics")
        if response.status_code != 200:
            raise EngineError(
                f"GET /metrics: HTTP {response.status_code} (start SGLang with --enable-metrics)"
            )
        return contract_metrics(response.text)

    def flush_cache(self) -> None:
        response = self._call("POST", "/flush_cache")
        if not 200 <= response.status_code < 300:
            raise EngineError(f"flush_cache refused: {error_message(response)}")

    def close(self) -> None:
        self._http.close()

    # ---- tokens -------------------------------------------------------------------------

    def render_chat(self, messages: tuple[tuple[str, str], ...]) -> str:
        return self.tokenizer().apply_chat_template(
            [{"role": r, "content": c} for r, c in messages],
            tokenize=False,
            add_generation_prompt=True,
        )

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer()(text, add_special_tokens=False).input_ids)

    def count_tokens(self, text: str) -> int:
        return len(self.encode(text))

    def token_texts(self, ids: list[int]) -> list[str]:
        return self._decoder().texts(ids)

    def token_bytes(self, ids: list[int]) -> list[bytes]:
        return self._decoder().bytes(ids)

    def _decoder(self) -> TokenDecoder:
        tokenizer = self.tokenizer()
        with self._lock:
            if self._tokens is None:
                self._tokens = TokenDecoder(tokenizer)
            return self._tokens

    def tokenizer(self) -> Any:
        """The local tokenizer, loaded once (see the module docstring for where from)."""
        with self._lock:
            if self._tokenizer is None:
                path = self._tokenizer_spec or self._json("/get_model_info").get("tokenizer_path")
                if not path or not Path(str(path)).exists():
                    raise EngineError(
                        f"no local tokenizer: pass tokenizer=..., the server's is {path!r}"
                    )
                from transformers import AutoTokenizer

                self._tokenizer = AutoTokenizer.from_pretrained(str(path))
            return self._tokenizer

    def _config_context_length(self, model_path: object) -> int:
        if not model_path or not Path(str(model_path)).is_dir():
            return 0
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(str(model_path))
        return int(getattr(config, "max_position_embeddings", 0) or 0)
