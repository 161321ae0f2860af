"""The conformance suites' backends: the embedded engine in-process; ``SGLangEngine`` against
the embedded engine's SGLang-compatible server (uvicorn in a thread); and, when ``SGLANG_URL``
is set (a GPU box), ``SGLangEngine`` against a real SGLang server (``SGLANG_TOKENIZER``: a
local tokenizer path). One server per test module."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.backends import Backend
from support.servers import MODEL, serving


@pytest.fixture(scope="session")
def gemv_f32(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """The AVX2 library, built for real once per session in a fresh folder: its float32 GEMV
    (decode attention and RMSNorm load from its ``library``). Tests that use it carry
    ``support.avx2_kernels.needs_avx2``."""
    from engine.embedded.gemv_f32 import load_gemv_f32

    loaded = load_gemv_f32(tmp_path_factory.mktemp("avx2-kernels"))
    assert loaded is not None
    return loaded


@pytest.fixture(scope="module")
def server_url(engine) -> Iterator[str]:  # noqa: ANN001
    from engine.server.app import build_server_app

    with serving(build_server_app(engine, MODEL)) as url:
        yield url


@pytest.fixture(scope="module", params=["embedded", "client", "sglang"])
def backend(request: pytest.FixtureRequest, model_dir: Path) -> Iterator[Backend]:
    from engine.sglang.client import SGLangEngine

    if request.param == "embedded":
        yield Backend("embedded", request.getfixturevalue("engine"))
        return
    if request.param == "client":
        url = request.getfixturevalue("server_url")
        client = SGLangEngine(url, tokenizer=str(model_dir), timeout_s=60)
        yield Backend("client", client)
        client.close()
        return
    if not os.environ.get("SGLANG_URL"):
        pytest.skip("SGLANG_URL is not set: no real SGLang server to test against")
    real = SGLangEngine(os.environ["SGLANG_URL"], tokenizer=os.environ.get("SGLANG_TOKENIZER"))
    yield Backend("sglang", real, real_sglang=True)
    real.close()
