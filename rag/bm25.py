"""Lexical BM25 retrieval keyed by chunk id (bm25s), Korean-aware through ``Tokenizer``.

bm25s indexes are static, so the index keeps each chunk's tokens (as ids into a growing
vocabulary) and re-indexes lazily on the first search after a change; tokenising happens once
per chunk, on ``add``. Persistence is one ``.npz`` file (ids, token ids, vocabulary) written
atomically; the bm25s matrix is rebuilt on the first search after ``load``.

Length normalisation is ``LENGTH_NORM`` = 0.3, not the usual 0.75: a manual's shortcut table
or option list is a long chunk that holds each fact once, and at 0.75 the short paragraph that
names the topic outranked it ("라이터에서 위 첨자를 적용하는 단축키는?": the table sixth, the
"this section lists the shortcuts" paragraph first). Measured through the chat path
(``appliance bench quality --mode extractive``, top 4 chunks), the fact in the retrieved
chunks, dev halves (tuned here): b 0.75 / 0.5 / 0.3: LibreOffice KO 15 / 16 / 16 of 16,
PostgreSQL EN 21 / 20 / 21 of 21, Python EN 11 / 11 / 11, handbook 47 / 47 / 47 of 48; held
out at 0.3 against 0.75: KO 14 -> 15 of 16, PostgreSQL 21 -> 21, Python 10 -> 10, handbook
24 -> 24 of 24 (the card's first unit: KO 14 -> 15, PostgreSQL 21 -> 20, the others equal).
The price: the first citation is the gold page less often (dev KO 15 -> 13 of 16, held out KO
12 -> 11, PostgreSQL 20 -> 19 of 21), as a long page that holds the fact among others now
ranks first where the short page about it did.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import bm25s
import numpy as np

from rag.atomic import atomic_write
from rag.bm25_tokenizer import Tokenizer

BM25_FILE = "bm25.npz"
LENGTH_NORM = 0.3  # BM25's b (see the module doc)


class BM25Index:
    """BM25 (Lucene variant, k1=1.5, b=``LENGTH_NORM``) over chunks; ``search`` returns (id,
    score)."""

    def __init__(self, tokenizer: Tokenizer | None = None) -> None:
        self.tokenizer = tokenizer or Tokenizer()
        self._vocab: dict[str, int] = {}
        self._docs: dict[int, np.ndarray] = {}
        self._retriever: bm25s.BM25 | None = None
        self._order = np.zeros(0, dtype=np.int64)
        self._lock = threading.RLock()

    @property
    def size(self) -> int:
        return len(self._docs)

    def ids(self) -> set[int]:
        return set(self._docs)

    def add(self, ids: Sequence[int], texts: Sequence[str]) -> None:
        """Add or replace chunks (an existing id is re-tokenised)."""
        if len(ids) != len(texts):
            raise ValueError("ids and texts differ in length")
        tokens = self.tokenizer.tokenize_many(list(texts))
        with self._lock:
            for cid, toks in zip(ids, tokens, strict=True):
                self._docs[int(cid)] = self._encode(toks, grow=True)
            self._retriever = None

    def remove(self, ids: Sequence[int]) -> int:
        """Drop chunks; returns how many were present."""
        with self._lock:
            removed = sum(self._docs.pop(int(i), None) is not None for i in ids)
            if removed:
                self._retriever = None
            return removed

    def _encode(self, tokens: Sequence[str], grow: bool) -> np.ndarray:
        if grow:
            for t in tokens:
                self._vocab.setdefault(t, len(self._vocab))
            return np.fromiter((self._vocab[t] for t in tokens), dtype=np.int32)
        known = [self._vocab[t] for t in tokens if t in self._vocab]
        return np.asarray(known, dtype=np.int32)

    def reindex(self) -> None:
        """Rebuild the bm25s matrix from the stored tokens (``search`` does this when needed)."""
        with self._lock:
            order = np.fromiter(self._docs.keys(), dtype=np.int64, count=len(self._docs))
            corpus = [doc.tolist() for doc in self._docs.values()]
            logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs each build at DEBUG
            retriever = bm25s.BM25(b=LENGTH_NORM)
            if corpus:
                vocab = dict(self._vocab)  # bm25s adds its empty token to the dict it is given
                vocab.setdefault("", len(vocab))
                retriever.index((corpus, vocab), create_empty_token=False, show_progress=False)
            self._retriever, self._order = retriever, order

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        """The top-k chunks with a positive BM25 score, best first."""
        if k <= 0 or not self._docs:
            return []
        query_ids = self._encode(self.tokenizer.tokenize(query), grow=False)
        if not len(query_ids):
            return []
        with self._lock:
            if self._retriever is None:
                self.reindex()
            retriever, order = self._retriever, self._order
        assert retriever is not None
        scores = retriever.get_scores(np.unique(query_ids).tolist())
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(order[i]), float(scores[i])) for i in top if scores[i] > 0]

    def save(self, directory: Path) -> None:
        """Write ids, tokens and vocabulary to ``directory/bm25.npz`` atomically."""
        with self._lock:
            ids = np.fromiter(self._docs.keys(), dtype=np.int64, count=len(self._docs))
            docs = list(self._docs.values())
            lengths = np.fromiter((len(d) for d in docs), dtype=np.int64, count=len(docs))
            flat = np.concatenate(docs) if docs else np.zeros(0, dtype=np.int32)
            words = sorted(self._vocab, key=self._vocab.__getitem__)
        vocab = np.frombuffer("\n".join(words).encode("utf-8"), dtype=np.uint8)

        def write(tmp: str) -> None:
            with open(tmp, "wb") as fh:
                np.savez(fh, ids=ids, lengths=lengths, tokens=flat, vocab=vocab)

        atomic_write(directory / BM25_FILE, write)

    @classmethod
    def load(cls, directory: Path, tokenizer: Tokenizer | None = None) -> BM25Index | None:
        """The saved index, or None when there is none (or it is unreadable)."""
        try:
            with np.load(directory / BM25_FILE) as data:
                ids, lengths = data["ids"], data["lengths"]
                flat, raw = data["tokens"], data["vocab"].tobytes()
        except (OSError, ValueError, KeyError):
            return None
        index = cls(tokenizer)
        words = raw.decode("utf-8").split("\n") if raw else []
        index._vocab = {w: i for i, w in enumerate(words)}
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        index._docs = {
            int(cid): flat[bounds[n] : bounds[n + 1]].copy() for n, cid in enumerate(ids)
        }
        return index
