"""``appliance bench index``: dense, BM25 and hybrid retrieval at 10k and 100k chunks.

For each size: build times, query latency p50/p95 (200 queries) for dense (FAISS), BM25 and
hybrid (RRF), and recall@10 of the index as built (HNSW above its 20k threshold) against exact
search. The corpus is synthetic (see ``appliance.bench.synthetic``): its vectors are random
unit vectors around topic centroids, not embeddings, so that 100k chunks take seconds to make.
Real embedding and ingest throughput is measured separately on the shipped sample corpus: the
chunk vectors alone (as before evidence pieces), then with the pieces' vectors pooled from the
same pass (``rag.piece_vectors``; target: at least 0.7x), and the evidence ranking latency for
10 chunks (target: p95 <= 30 ms). Then the office formats' parse throughput (XLSX, CSV, HWPX,
HWP) and OCR's pages per second and character accuracy on rendered English and Korean pages.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import faiss
import numpy as np

from appliance.bench.index_formats import measure_formats
from appliance.bench.index_ocr import measure_ocr
from appliance.bench.synthetic import make_corpus
from appliance.bench.table import render
from appliance.core.config import SAMPLE_CORPUS, AppConfig, RagConfig
from rag import ann
from rag.bm25 import BM25Index
from rag.embeddings import Embedder
from rag.evidence import EvidenceCandidate, rank_evidence
from rag.hybrid import HybridRetriever
from rag.index import VectorIndex
from rag.parsers import ParseError
from rag.piece_store import ChunkPieces
from rag.piece_vectors import build_pieces

DIM, K, N_QUERIES, WORDS_PER_PAGE = 384, 10, 200, 500
HYBRID_P95_MS, RECALL_TARGET = 50.0, 0.95
EVIDENCE_P95_MS, PIECES_RATIO = 30.0, 0.7
OCR_ACCURACY = 0.95


def _latencies_ms(run: Callable[[int], object], n: int) -> tuple[float, float]:
    """p50 and p95 in milliseconds of ``run(i)`` for i in range(n), after two warm-up calls."""
    run(0)
    run(1 % n)
    times = []
    for i in range(n):
        start = time.perf_counter()
        run(i)
        times.append((time.perf_counter() - start) * 1000)
    return float(np.percentile(times, 50)), float(np.percentile(times, 95))


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _ok(met: bool) -> str:
    return "yes" if met else "NO"


def bench_size(n_docs: int, ann_threshold: int, bm25: BM25Index | None = None) -> list[tuple]:
    """Table rows for one corpus size."""
    corpus = make_corpus(n_docs, N_QUERIES, DIM)
    ids = np.arange(1, n_docs + 1, dtype=np.int64)
    dense = VectorIndex(DIM, "synthetic", ann_threshold=ann_threshold)
    build_dense = _timed(lambda: dense.add(ids.tolist(), corpus.vectors))
    lexical = BM25Index(bm25.tokenizer if bm25 else None)
    tokenize_s = _timed(lambda: lexical.add(ids.tolist(), corpus.texts))
    reindex_s = _timed(lexical.reindex)
    qv, qt = corpus.query_vectors, corpus.query_texts
    lookup = {t: qv[i] for i, t in enumerate(qt)}  # the synthetic "embedding" of each query
    hybrid = HybridRetriever(dense, lexical, embed=lambda ts: np.stack([lookup[t] for t in ts]))

    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)  # one query at a time: OpenMP only adds overhead
    try:
        d50, d95 = _latencies_ms(lambda i: dense.search(qv[i], K), N_QUERIES)
        b50, b95 = _latencies_ms(lambda i: lexical.search(qt[i], K), N_QUERIES)
        h50, h95 = _latencies_ms(lambda i: hybrid.search(qt[i], K), N_QUERIES)
    finally:
        faiss.omp_set_num_threads(threads)

    truth = ann.exact_top_k(corpus.vectors, ids, qv, K)
    found = np.array([[i for i, _ in dense.search(q, K)] for q in qv])
    recall = ann.recall_at_k(found, truth)
    sources = corpus.query_sources + 1
    hit_lex = np.mean([sources[i] in dict(lexical.search(qt[i], K)) for i in range(20)])
    size = f"{n_docs:,}"
    kind = f"{dense.kind}" + (f", efSearch {dense.ef_search}" if dense.kind == "hnsw" else "")
    return [
        (size, "build: dense add (synthetic vectors)", f"{build_dense:.1f} s ({kind})", "", ""),
        (size, "build: BM25 tokenise (Kiwi + regex)", f"{tokenize_s:.1f} s", "", ""),
        (size, "build: BM25 re-index (bm25s)", f"{reindex_s:.2f} s", "", ""),
        (size, "dense query p50 / p95", f"{d50:.2f} / {d95:.2f} ms", "", ""),
        (size, "BM25 query p50 / p95", f"{b50:.2f} / {b95:.2f} ms", "", ""),
        (
            size,
            "hybrid query p50 / p95 (excl. embedding)",
            f"{h50:.2f} / {h95:.2f} ms",
            f"p95 <= {HYBRID_P95_MS:.0f} ms" if n_docs >= 100_000 else "",
            _ok(h95 <= HYBRID_P95_MS) if n_docs >= 100_000 else "",
        ),
        (
            size,
            f"dense recall@10 vs exact ({dense.kind})",
            f"{recall:.3f}",
            f">= {RECALL_TARGET}",
            _ok(recall >= RECALL_TARGET),
        ),
        (size, "BM25 finds the query's source in top 10", f"{hit_lex:.2f} (20 queries)", "", ""),
    ]


def bench_embedding() -> list[tuple]:
    """Real embedding + ingest throughput on the sample corpus (all-MiniLM-L6-v2, CPU)."""
    import torch

    from rag.chunking import chunk_sections
    from rag.types import Section

    sections = [
        Section(heading=p.stem, text=p.read_text(encoding="utf-8"))
        for p in sorted(SAMPLE_CORPUS.iterdir())
        if p.suffix in {".md", ".txt", ".json"}
    ]
    words = sum(len(s.text.split()) for s in sections)
    embedder = Embedder()
    tok = embedder.model.tokenizer

    def count(text: str) -> int:
        return len(tok(text, add_special_tokens=False, verbose=False)["input_ids"])

    chunks = [d.text for d in chunk_sections(sections, count, 256, 32)]
    embedder.embed(chunks[:4])  # warm-up
    ids = list(range(1, len(chunks) + 1))
    dense, lexical = VectorIndex(embedder.dim, embedder.name), BM25Index()
    lexical.add([0], ["워밍업 warm-up"])  # load Kiwi outside the timing
    build_pieces(embedder, ["워밍업 warm-up."], ["워밍업 warm-up."], lexical.tokenizer)
    start = time.perf_counter()
    embedder.embed(chunks)
    embed_s = time.perf_counter() - start
    start = time.perf_counter()
    vectors, pieces = build_pieces(embedder, chunks, chunks, lexical.tokenizer)
    pieces_s = time.perf_counter() - start
    dense.add(ids, vectors)
    lexical.add(ids, chunks)
    lexical.reindex()
    total_s = time.perf_counter() - start
    evidence = _evidence_latency(embedder, lexical, chunks, pieces)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one short query: more threads only contend on a small box
    try:
        q50, q95 = _latencies_ms(lambda i: embedder.embed([chunks[i % len(chunks)][:200]]), 50)
    finally:
        torch.set_num_threads(threads)
    pages = words / WORDS_PER_PAGE
    label = f"sample ({len(chunks)} chunks)"
    return [
        (
            label,
            f"embed, real model on CPU ({words:,} words)",
            f"{len(chunks) / embed_s:.1f} chunks/s",
            "",
            "",
        ),
        (
            label,
            "embed + evidence pieces (one pass, pooled)",
            f"{len(chunks) / pieces_s:.1f} chunks/s",
            f">= {PIECES_RATIO}x embed only",
            _ok(embed_s / pieces_s >= PIECES_RATIO),
        ),
        (
            label,
            "embed + pieces + dense + BM25 ingest",
            f"{len(chunks) / total_s:.1f} chunks/s",
            "",
            "",
        ),
        (
            label,
            "evidence ranking p50 / p95 (10 chunks)",
            f"{evidence[0]:.2f} / {evidence[1]:.2f} ms",
            f"p95 <= {EVIDENCE_P95_MS:.0f} ms",
            _ok(evidence[1] <= EVIDENCE_P95_MS),
        ),
        (
            label,
            f"pages/s (~{WORDS_PER_PAGE} words/page)",
            f"{pages / total_s:.2f} pages/s",
            "",
            "",
        ),
        (label, "query embedding p50 / p95 (1 thread)", f"{q50:.1f} / {q95:.1f} ms", "", ""),
    ]


def _evidence_latency(
    embedder: Embedder, lexical: BM25Index, chunks: list[str], pieces: list[ChunkPieces]
) -> tuple[float, float]:
    """p50 / p95 ms of ranking the pieces of 10 chunks (question tokens included; its vector
    is the one retrieval computed)."""
    questions = [c.split(".")[0][:120] for c in chunks[:: max(1, len(chunks) // 50)]]
    vectors = embedder.embed(questions)

    def run(i: int) -> None:
        n = i % len(questions)
        first = (n * 7) % max(1, len(chunks) - 10)
        cands = [EvidenceCandidate(c, chunks[c], pieces[c]) for c in range(first, first + 10)]
        rank_evidence(vectors[n], lexical.tokenizer.tokenize(questions[n]), cands)

    return _latencies_ms(run, 100)


def bench_formats(rag: RagConfig) -> list[tuple]:
    """Parse throughput of the office formats (generated files of realistic size), and OCR:
    pages per second and character accuracy on 200-dpi renders of known English and Korean
    text (target: 0.95 each)."""
    rows: list[tuple] = [
        (fmt, f"parse throughput ({units})", f"{rate:,.0f} {units}/s", "", "")
        for fmt, units, rate in measure_formats()
    ]
    try:
        pages_s, en, ko = measure_ocr(rag)
    except ParseError as exc:  # OCR off or Tesseract missing: say so, as the ingest would
        return [*rows, ("OCR", "scanned PDF pages", str(exc)[:60], "", "NO")]
    rows += [
        ("OCR", "scanned PDF pages (200 dpi, kor+eng)", f"{pages_s:.2f} pages/s", "", ""),
        (
            "OCR",
            "character accuracy, English",
            f"{en:.3f}",
            f">= {OCR_ACCURACY}",
            _ok(en >= OCR_ACCURACY),
        ),
        (
            "OCR",
            "character accuracy, Korean",
            f"{ko:.3f}",
            f">= {OCR_ACCURACY}",
            _ok(ko >= OCR_ACCURACY),
        ),
    ]
    return rows


def run_index_bench(quick: bool = False, rag: RagConfig | None = None) -> str:
    """The benchmark table; ``quick`` uses 1k and 5k chunks (HNSW from 2k) and skips the model.
    With ``rag`` (the config's section), the office formats' and OCR's rows too."""
    sizes, threshold = ((1_000, 5_000), 2_000) if quick else ((10_000, 100_000), 20_000)
    shared = BM25Index()
    load_s = _timed(lambda: shared.tokenizer.tokenize("한국어 형태소 분석기 준비"))
    rows: list[tuple] = [("-", "Kiwi analyser load (once per process)", f"{load_s:.1f} s", "", "")]
    for n in sizes:
        rows += bench_size(n, threshold, shared)
    if not quick:
        rows += bench_embedding()
    if rag is not None:
        rows += bench_formats(rag)
    table = render(("corpus", "measure", "result", "target", "met"), rows)
    note = (
        f"Vectors are synthetic (random unit vectors, dim {DIM}, around topic centroids), not "
        f"embeddings; queries: {N_QUERIES} per size, k={K}, hybrid = RRF over 4k from each side. "
        f"ANN (HNSW, M=32, efConstruction=80) from {threshold:,} chunks; below it search is exact. "
        "Query timings run faiss with one OpenMP thread."
    )
    return table + "\n" + note


def main(argv: list[str], config: AppConfig) -> int:
    """``appliance bench index [--quick]``."""
    parser = argparse.ArgumentParser(prog="appliance bench index")
    parser.add_argument("--quick", action="store_true", help="1k and 5k chunks, no model")
    args = parser.parse_args(argv)
    print(run_index_bench(quick=args.quick, rag=config.rag))
    return 0
