"""The corpora of ``appliance bench embedders``: the real sets and the sample handbook, chunked
as ``IngestService.ingest_folder`` chunks them, and the texts file a worker embeds."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "appliance" / "sample_corpus"


@dataclass(frozen=True)
class BenchChunk:
    doc: str  # the stored name
    text: str  # the chunk's own text (what the fact is looked for in)
    embed_text: str  # header + text, what ingest embeds and BM25-indexes


@dataclass(frozen=True)
class Corpus:
    name: str
    chunks: list[BenchChunk]
    questions: list[dict]


def corpus_chunks(folder: Path, config: object | None = None) -> list[BenchChunk]:
    """The chunks ingest makes of ``folder`` (``IngestService.ingest_folder``'s path, without
    the database): parsed, repeated blocks dropped, chunked by the configured budget."""
    import hashlib

    from appliance.core.config import AppConfig
    from appliance.core.names import stored_path
    from appliance.core.services.ingest import files_in
    from appliance.core.services.knowledge import embedding_text
    from rag.boilerplate import RepeatRule, document_blocks, repeated_blocks, strip_blocks
    from rag.chunk_budget import ChunkBudget
    from rag.chunking import chunk_document
    from rag.parsers import ParseError, parse_file

    rag = (config if isinstance(config, AppConfig) else AppConfig()).rag
    budget = ChunkBudget.from_chars(rag.chunk_chars, rag.chunk_overlap_chars, rag.chunk_floor_chars)
    rule = RepeatRule(rag.repeat_min_docs, rag.repeat_min_share)
    docs, seen = {}, set()
    for path in files_in(folder):
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if len(data) > rag.max_upload_mb * 1024 * 1024 or digest in seen:
            continue  # refused, or a duplicate of a file already in
        name = stored_path([*path.parent.relative_to(folder).parts, path.name])
        try:
            docs[name] = parse_file(name, data)
        except ParseError:
            continue
        seen.add(digest)
    repeated = repeated_blocks({n: document_blocks(d.sections) for n, d in docs.items()}, rule)
    out = []
    for name, doc in docs.items():
        for d in chunk_document(strip_blocks(doc.sections, repeated), len, budget):
            out.append(BenchChunk(name, d.text, embedding_text(doc.title, d.section, d.text)))
    return out


def questions_of(files: dict[str, Path]) -> list[dict]:
    """Every question of both splits, each marked with its split (``_split``)."""
    return [
        {**q, "_split": split}
        for split, path in files.items()
        for q in json.loads(path.read_text(encoding="utf-8"))
    ]


def load_corpora(real: Path, sets: Sequence[str], config: object) -> list[Corpus]:
    """The real sets found under ``real`` (a missing one is reported) and the sample corpus,
    with the questions of both splits (the vectors do not depend on the split scored)."""
    out = []
    for name in sets:
        if name == "sample":
            files = {"dev": SAMPLE / "qa.json", "heldout": SAMPLE / "qa_heldout.json"}
            out.append(Corpus("sample", corpus_chunks(SAMPLE, config), questions_of(files)))
            continue
        folder, qdir = real / name, REPO / "appliance" / "bench" / "real_sets" / name
        if not folder.is_dir():
            print(
                f"skipped {name}: no corpus in {folder}; build it with "
                f"python -m appliance.bench.real_corpus {real} {name}"
            )
            continue
        files = {s: qdir / f"{s}.json" for s in ("dev", "heldout")}
        out.append(Corpus(name, corpus_chunks(folder, config), questions_of(files)))
    return out


def texts_file(corpus: Corpus, folder: Path) -> tuple[Path, str]:
    """The corpus's texts for a worker, written once; and their digest."""
    import hashlib

    texts = {
        "passages": [x.embed_text for x in corpus.chunks],
        "chunks": [x.text for x in corpus.chunks],
        "queries": [q["question"] for q in corpus.questions],
    }
    blob = json.dumps(texts, ensure_ascii=False)
    digest = hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]
    path = folder / f"{corpus.name}-{digest}.texts.json"
    if not path.is_file():
        path.write_text(blob, encoding="utf-8")
    return path, digest
