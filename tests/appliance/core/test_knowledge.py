"""The knowledge base through the real services: hybrid retrieval (FAISS + Korean-aware BM25),
collection access, delete and update, a batch with bad files, and a crash during ingest."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import select

from appliance.core.db.models import Chunk
from appliance.core.services.chat import RetrievalEvent

FINANCE_DOC = (
    "# Quarterly Budget Review\n\n## Capital expenses\n\n"
    "The zeppelin hangar refurbishment budget for Q3 is 412 million won, approved by the CFO.\n"
)


def sources(appliance, query: str, collections=None) -> list[str]:  # noqa: ANN001
    hits, _ = appliance.knowledge.retrieve(query, 4, collections)
    return [h.source for h in hits]


def test_korean_question_finds_the_korean_document(appliance) -> None:  # noqa: ANN001
    assert (
        sources(appliance, "VPN 비밀번호를 어떻게 재설정하나요?")[0] == "it-vpn-and-security-ko.md"
    )
    assert "hr-onboarding-ko.md" in sources(appliance, "신규 입사자 첫 주 일정")


def test_collections_limit_what_a_user_retrieves(appliance) -> None:  # noqa: ANN001
    result = appliance.ingest.ingest_bytes("budget.md", FINANCE_DOC.encode(), collection="finance")
    assert result.status == "indexed"
    query = "zeppelin hangar refurbishment budget"
    staff = appliance.auth.create_user("acl-staff", "password-123")
    assert "budget.md" not in sources(appliance, query, staff.allowed_collections)
    events = list(appliance.chat.ask(staff, query))
    assert isinstance(events[0], RetrievalEvent)
    assert all(c.source != "budget.md" for c in events[0].citations)
    admin = appliance.auth.principal_for("admin")
    assert sources(appliance, query, admin.allowed_collections)[0] == "budget.md"
    granted = appliance.auth.set_collections("acl-staff", ["default", "finance"])
    assert sources(appliance, query, granted.allowed_collections)[0] == "budget.md"


def test_delete_and_update_reach_both_indexes(appliance) -> None:  # noqa: ANN001
    v1 = "# Parking\n\n## Bicycles\n\nBicycle racks for the quokka team are on level B2.\n"
    v2 = "# Parking\n\n## Bicycles\n\nBicycle racks for the quokka team moved to level B3.\n"
    first = appliance.ingest.ingest_bytes("parking.md", v1.encode())
    assert first.status == "indexed"
    again = appliance.ingest.ingest_bytes("parking.md", v1.encode())
    assert again.status == "duplicate"  # same bytes: no duplicate chunks
    second = appliance.ingest.ingest_bytes("parking.md", v2.encode())
    assert second.status == "updated"
    hits, _ = appliance.knowledge.retrieve("quokka bicycle racks", 4)
    texts = [h.text for h in hits if h.source == "parking.md"]
    assert texts and all("B3" in t for t in texts)  # the old version is gone
    with appliance.db.session() as s:
        ids = set(s.scalars(select(Chunk.id).where(Chunk.document_id == second.document_id)))
    assert ids <= appliance.knowledge.index.ids() and ids <= appliance.knowledge.bm25.ids()
    assert appliance.ingest.delete_document(second.document_id)
    assert "parking.md" not in sources(appliance, "quokka bicycle racks")
    assert not ids & appliance.knowledge.index.ids()
    assert not ids & appliance.knowledge.bm25.ids()


def test_a_batch_with_bad_files_ingests_the_good_ones(appliance, tmp_path: Path) -> None:  # noqa: ANN001
    (tmp_path / "good.md").write_text("# Lockers\n\n## Rules\n\nLockers open with badges.\n")
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog")
    (tmp_path / "tool.exe").write_bytes(b"MZ\x90\x00")
    (tmp_path / "fake.docx").write_bytes(b"%PDF-1.4 not a word file")
    results = {r.name: r for r in appliance.ingest.ingest_paths(sorted(tmp_path.iterdir()))}
    assert results["good.md"].status == "indexed"
    for bad in ("empty.txt", "broken.pdf", "tool.exe", "fake.docx"):
        assert results[bad].status == "error" and results[bad].error
    assert "empty" in results["empty.txt"].error
    assert "good.md" in sources(appliance, "Lockers open with badges")
    too_big = appliance.ingest.ingest_bytes("huge.txt", b"x" * (51 * 1024 * 1024))
    assert too_big.status == "error" and "limit" in too_big.error


def test_killed_ingest_leaves_a_consistent_index(tmp_path: Path, model_dir, embedder) -> None:  # noqa: ANN001
    from appliance.core.config import load_config
    from appliance.core.db.session import Database
    from appliance.core.services.knowledge import KnowledgeBase

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(40):
        corpus.joinpath(f"memo-{i:02d}.md").write_text(
            f"# Memo {i}\n\n## Topic\n\n" + f"Memo number {i} covers item {i * 7}. " * 40
        )
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    env |= {
        "APPLIANCE_PATHS__DATA_DIR": str(data),
        "APPLIANCE_ENGINE__MODEL_PATH": str(model_dir),
        "PYTHONUNBUFFERED": "1",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "appliance.cli", "ingest", str(corpus)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    deadline = time.time() + 300
    indexed = 0
    for line in proc.stdout:
        indexed += line.startswith("indexed")
        if indexed >= 3 or time.time() > deadline:
            break
    proc.send_signal(signal.SIGKILL)  # mid-batch, possibly mid-write
    proc.wait(timeout=30)
    assert indexed >= 3
    config = load_config(environ={}, overrides={"paths": {"data_dir": str(data)}})
    db = Database(config.database_url)
    try:
        kb = KnowledgeBase(db, embedder, config.paths.index_dir)
        kb.reconcile()
        with db.session() as s:
            in_db = set(s.scalars(select(Chunk.id)))
        assert in_db and kb.index.ids() == in_db and kb.bm25.ids() == in_db
        hits, _ = kb.retrieve("Memo number 1 covers item 7", 2)
        assert hits and hits[0].title.startswith("Memo")
    finally:
        db.dispose()


# ---- evidence pieces ---------------------------------------------------------------------

HANDBOOK_FACTS = [  # (question, what the top evidence sentence must say)
    ("What are the length requirements for my Hanbit account password?", "14 characters"),
    ("How many days of paid sick leave do I get per year?", "10 days"),
    ("What is the IT helpdesk phone extension?", "4357"),
    ("What is the nightly hotel limit for business trips within Korea?", "150,000 KRW"),
    ("출장 데스크 내선 번호는 무엇인가요?", "3350"),
    ("유급 병가는 며칠인가요?", "10일"),
    ("보안 사고는 언제까지 신고해야 하나요?", "1시간"),
]


def test_pieces_are_stored_at_ingest_and_dropped_with_the_chunk(appliance) -> None:  # noqa: ANN001
    doc = "# Lockers\n\n## Rules\n\nLockers open with badges. Lost keys cost 5,000 KRW.\n"
    result = appliance.ingest.ingest_bytes("lockers.md", doc.encode())
    assert result.status == "indexed"
    kb = appliance.knowledge
    with appliance.db.session() as s:
        chunks = list(s.scalars(select(Chunk).where(Chunk.document_id == result.document_id)))
    texts = {c.id: c.text for c in chunks}
    for cid, text in texts.items():
        pieces = kb.pieces.get(cid)
        assert pieces is not None and len(pieces) == 2
        got = [text[s:e] for s, e in zip(pieces.starts, pieces.ends, strict=True)]
        assert got == ["Lockers open with badges.", "Lost keys cost 5,000 KRW."]
        assert pieces.vectors.shape == (2, kb.embedder.dim)
    assert appliance.ingest.delete_document(result.document_id)
    assert not set(texts) & kb.pieces.ids()


def test_evidence_puts_the_fact_sentence_first(appliance) -> None:  # noqa: ANN001
    kb = appliance.knowledge
    for question, fact in HANDBOOK_FACTS:
        chunks, _ = kb.retrieve(question, 4)
        spans = kb.evidence(question, chunks, k=2)
        assert len(spans) == 2, question
        assert fact in spans[0].text, (question, spans[0].text)
        by_id = {c.chunk_id: c for c in chunks}
        for span in spans:  # verbatim, from the chunks given
            assert by_id[span.chunk_id].text[span.start : span.end] == span.text
    assert kb.evidence("", chunks) == [] and kb.evidence("sick leave", []) == []
    assert kb.evidence("sick leave", chunks, k=0) == []


def test_evidence_for_ten_chunks_is_fast(appliance) -> None:  # noqa: ANN001
    kb = appliance.knowledge
    question = "How many days of sick leave do I get?"
    chunks, _ = kb.retrieve(question, 10)
    times = []
    for _ in range(20):
        start = time.perf_counter()
        kb.evidence(question, chunks)
        times.append(time.perf_counter() - start)
    assert sorted(times)[len(times) // 2] < 0.03  # generous: the budget is a p95 of 30 ms


def test_reconcile_fills_in_the_pieces_of_an_old_index(appliance, tmp_path: Path) -> None:  # noqa: ANN001
    import shutil

    from appliance.core.services.knowledge import KnowledgeBase
    from rag.piece_store import PIECES_FILE

    kb = appliance.knowledge
    for name in ("vectors.faiss", "manifest.json", "bm25.npz"):  # an index from before pieces
        shutil.copy(kb.index_dir / name, tmp_path / name)
    old = KnowledgeBase(appliance.db, kb.embedder, tmp_path)
    assert old.pieces.size == 0 and old.index.ids() == kb.index.ids()
    assert old.reconcile() == (0, 0)  # no vector was missing
    assert old.pieces.ids() == kb.index.ids() and (tmp_path / PIECES_FILE).is_file()
    cid = next(iter(kb.pieces.ids()))
    assert old.pieces.get(cid).starts.tolist() == kb.pieces.get(cid).starts.tolist()
    again = KnowledgeBase(appliance.db, kb.embedder, tmp_path)  # it was saved
    assert again.pieces.ids() == kb.index.ids()


def test_reindex_through_the_cli(tmp_path: Path, model_dir, engine, embedder, config_for) -> None:  # noqa: ANN001
    from appliance.wiring.appliance import build_appliance
    from rag.index import INDEX_FILE, MANIFEST_FILE, VectorIndex
    from rag.piece_store import PIECES_FILE, PieceStore

    data = tmp_path / "data"
    config = config_for(data, model_dir, bootstrap={"ingest_sample_corpus": False})
    app = build_appliance(config, engine=engine, embedder=embedder)
    try:
        app.ingest.ingest_bytes("budget.md", FINANCE_DOC.encode())
        ids = app.knowledge.index.ids()
    finally:
        app.db.dispose()
    # as the index looks after a switch of rag.embedding_model_path: another model's vectors
    manifest_file = config.paths.index_dir / MANIFEST_FILE
    manifest = json.loads(manifest_file.read_text())
    manifest_file.write_text(json.dumps(manifest | {"model": "bge-m3", "dim": 1024}))
    vectors_before = (config.paths.index_dir / INDEX_FILE).read_bytes()
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    env |= {"APPLIANCE_PATHS__DATA_DIR": str(data), "APPLIANCE_ENGINE__MODEL_PATH": str(model_dir)}
    (tmp_path / "new.md").write_text("# Travel\n\nTrains are booked through the portal.\n")
    mixed = subprocess.run(
        [sys.executable, "-m", "appliance.cli", "ingest", str(tmp_path / "new.md")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert mixed.returncode == 2, mixed.stderr
    assert "'bge-m3' (dim 1024)" in mixed.stderr and repr(embedder.name) in mixed.stderr
    assert "appliance ingest --reindex" in mixed.stderr
    assert (config.paths.index_dir / INDEX_FILE).read_bytes() == vectors_before  # nothing mixed
    (config.paths.index_dir / PIECES_FILE).unlink()
    out = subprocess.run(
        [sys.executable, "-m", "appliance.cli", "ingest", "--reindex"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    assert f"reindexed {len(ids)} chunks" in out.stdout and "reindex" in out.stderr
    store = PieceStore.load(config.paths.index_dir, embedder.dim, embedder.name)
    assert store is not None and store.ids() == ids
    index = VectorIndex.load(config.paths.index_dir, embedder.dim, embedder.name)
    assert index is not None and index.ids() == ids  # the configured embedder's, in full
    refused = subprocess.run(
        [sys.executable, "-m", "appliance.cli", "ingest"], capture_output=True, text=True, env=env
    )
    assert refused.returncode == 2 and "--reindex" in refused.stderr
