"""Chunk vectors and evidence pieces from one forward pass of the embedder (at ingest).

Each chunk is embedded as its header plus its text (``embed_texts[i]`` ends with
``chunk_texts[i]``); the pieces of ``chunk_texts[i]`` (``rag.sentences.split_pieces``) are
mapped through that prefix, and each piece's vector is the mean of its tokens' contextual
embeddings in the chunk's pass (``Embedder.embed_with_spans``). So the sentence vectors cost
no second pass, except for the pieces past the model's window, which are embedded alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rag.bm25_tokenizer import Tokenizer
from rag.embeddings import Embedder
from rag.piece_store import ChunkPieces, make_pieces
from rag.sentences import split_pieces


def build_pieces(
    embedder: Embedder,
    embed_texts: Sequence[str],
    chunk_texts: Sequence[str],
    tokenizer: Tokenizer,
    show_progress: bool = False,
) -> tuple[np.ndarray, list[ChunkPieces]]:
    """The chunk vectors (as ``embedder.embed(embed_texts)``) and each chunk's pieces, with
    offsets into ``chunk_texts[i]``, vectors and BM25 tokens."""
    if len(embed_texts) != len(chunk_texts):
        raise ValueError("embed_texts and chunk_texts differ in length")
    spans, shifted = [], []
    for full, text in zip(embed_texts, chunk_texts, strict=True):
        if not full.endswith(text):
            raise ValueError("each embedding text must end with its chunk's text")
        prefix = len(full) - len(text)
        pieces = [(p.start, p.end, p.kind) for p in split_pieces(text)]
        spans.append(pieces)
        shifted.append([(s + prefix, e + prefix) for s, e, _ in pieces])
    chunk_vecs, piece_vecs = embedder.embed_with_spans(
        embed_texts, shifted, show_progress=show_progress
    )
    flat = [
        text[s:e] for text, pieces in zip(chunk_texts, spans, strict=True) for s, e, _ in pieces
    ]
    flat_terms = tokenizer.tokenize_many(flat) if flat else []
    out, at = [], 0
    for pieces, vecs in zip(spans, piece_vecs, strict=True):
        out.append(make_pieces(pieces, vecs, flat_terms[at : at + len(pieces)]))
        at += len(pieces)
    return chunk_vecs, out
