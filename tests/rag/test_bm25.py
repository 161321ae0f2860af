"""BM25Index: Korean morphemes, English words, removal, persistence."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rag.bm25 import BM25Index
from rag.bm25_tokenizer import Tokenizer, latin_tokens
from rag.sentences import shared_kiwi

DOCS = {
    1: "VPN 비밀번호를 재설정하려면 포털에 접속하세요",
    2: "연차 휴가는 인사팀 포털에서 신청하며, 휴가 일수는 근속 연수에 따라 달라집니다",
    3: "To request annual leave, open the HR portal and submit the leave form",
    4: "Reset your VPN password from the self-service portal before it expires",
}


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer()  # loads Kiwi once for the module


@pytest.fixture()
def index(tokenizer: Tokenizer) -> BM25Index:
    idx = BM25Index(tokenizer)
    idx.add(list(DOCS), list(DOCS.values()))
    return idx


def test_tokenizer_keeps_korean_content_morphemes(tokenizer: Tokenizer) -> None:
    tokens = tokenizer.tokenize("VPN 비밀번호를 재설정하려면 포털에 접속하세요")
    assert {"vpn", "비밀번호", "설정", "포털", "접속"} <= set(tokens)
    assert "를" not in tokens and "에" not in tokens  # particles dropped
    assert latin_tokens("The VPN, and the Portal") == ["vpn", "portal"]


def test_korean_query_ranks_the_korean_document_first(index: BM25Index) -> None:
    hits = index.search("비밀번호 재설정 방법", 4)
    assert hits[0][0] == 1
    assert 2 not in {i for i, _ in hits}


def test_english_match_without_stemming(index: BM25Index) -> None:
    assert index.search("annual leave form", 2)[0][0] == 3
    assert index.search("vpn password", 4)[0][0] in {1, 4}
    assert index.search("reset password", 4)[0][0] == 4
    assert index.search("zzzz qqqq", 4) == []


def test_remove_and_replace(index: BM25Index) -> None:
    assert index.remove([1, 99]) == 1
    assert 1 not in {i for i, _ in index.search("비밀번호 재설정", 4)}
    index.add([3], ["비밀번호 재설정 안내"])  # replaces document 3
    assert index.search("비밀번호 재설정", 4)[0][0] == 3
    assert index.search("annual leave form", 4) == []
    assert index.size == 3 and index.ids() == {2, 3, 4}


def test_save_load_round_trip(index: BM25Index, tokenizer: Tokenizer, tmp_path: Path) -> None:
    index.remove([4])
    before = index.search("vpn portal 휴가", 4)
    index.save(tmp_path)
    loaded = BM25Index.load(tmp_path, tokenizer)
    assert loaded is not None and loaded.ids() == {1, 2, 3}
    after = loaded.search("vpn portal 휴가", 4)
    assert [i for i, _ in after] == [i for i, _ in before]
    assert [s for _, s in after] == pytest.approx([s for _, s in before])
    assert BM25Index.load(tmp_path / "missing", tokenizer) is None


def test_the_tokenizer_uses_the_one_shared_kiwi(tokenizer: Tokenizer) -> None:
    tokenizer.tokenize("비밀번호")
    assert tokenizer._analyser() is shared_kiwi() is Tokenizer()._analyser()


def test_importing_the_tokenizer_loads_no_kiwi() -> None:
    code = (
        "import sys, rag.bm25, rag.sentences\n"
        "assert rag.sentences._kiwi is None and 'kiwipiepy' not in sys.modules\n"
        "assert rag.bm25.BM25Index().tokenizer.tokenize('VPN password') == ['vpn', 'password']\n"
        "assert 'kiwipiepy' not in sys.modules  # English text needs no Kiwi\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


def test_a_long_table_holding_the_fact_is_not_buried_by_its_length(tokenizer: Tokenizer) -> None:
    # a shortcut table is a long chunk with each fact once; at the usual b = 0.75 a short
    # chunk sharing one word of the question ("라이터") outranked it (rag.bm25's LENGTH_NORM)
    rows = [f"Ctrl + {k}\n기능 {n} 실행" for n, k in enumerate("ABCDEFGHIKLMNOQRSTUVWXZ")]
    rows.insert(12, "Ctrl + Shift + P\n위 첨자")
    table = "단축키\n효과\n" + "\n".join(rows)
    others = [
        "표를 삽입하려면 표 메뉴를 선택합니다.",
        "문서를 저장하려면 파일 메뉴에서 저장을 선택합니다.",
        "라이터에서 글꼴을 바꾸려면 서식 메뉴를 엽니다.",
    ]
    idx = BM25Index(tokenizer)
    idx.add([1, 2, 3, 4], [table, *others])
    ranked = [cid for cid, _ in idx.search("라이터에서 위 첨자를 적용하는 단축키는 무엇인가요?", 4)]
    assert ranked[0] == 1, ranked
