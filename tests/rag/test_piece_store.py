"""The piece store: round trip, removal, atomic save, another model's store; and the pooled
piece vectors from one forward pass (chunk vectors as ``embed``, truncated spans embedded alone)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from rag.bm25_tokenizer import Tokenizer
from rag.piece_store import PIECES_FILE, PieceStore, make_pieces
from rag.piece_vectors import build_pieces

DIM = 8


def pieces(seed: int, n: int):  # noqa: ANN201
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    spans = [(10 * j, 10 * j + 8, ("sentence", "item", "row")[j % 3]) for j in range(n)]
    terms = [[f"t{seed}", "비밀번호", f"w{j}"] if j % 2 else [] for j in range(n)]
    return make_pieces(spans, vecs, terms), vecs, terms


def test_round_trip_and_removal(tmp_path: Path) -> None:
    store = PieceStore(DIM, "m")
    a, a_vecs, a_terms = pieces(1, 4)
    b, _, _ = pieces(2, 3)
    empty, _, _ = pieces(3, 0)
    store.add([7, 9, 11], [a, b, empty])
    store.save(tmp_path)
    loaded = PieceStore.load(tmp_path, DIM, "m")
    assert loaded is not None and loaded.ids() == {7, 9, 11}
    got = loaded.get(7)
    assert got.starts.tolist() == [0, 10, 20, 30] and got.ends.tolist() == [8, 18, 28, 38]
    assert [got.kind(j) for j in range(4)] == ["sentence", "item", "row", "sentence"]
    assert got.piece_terms() == a_terms
    assert np.abs(got.vectors.astype(np.float32) - a_vecs).max() < 1e-3  # float16
    assert len(loaded.get(11)) == 0 and loaded.get(11).piece_terms() == []
    assert loaded.remove([9, 404]) == 1 and loaded.ids() == {7, 11}
    loaded.save(tmp_path)
    assert PieceStore.load(tmp_path, DIM, "m").ids() == {7, 11}


def test_another_model_or_a_torn_file_does_not_load(tmp_path: Path) -> None:
    store = PieceStore(DIM, "m")
    store.add([1], [pieces(1, 2)[0]])
    store.save(tmp_path)
    assert PieceStore.load(tmp_path, DIM, "other-model") is None
    assert PieceStore.load(tmp_path, DIM + 1, "m") is None
    assert PieceStore.load(tmp_path / "nowhere", DIM, "m") is None
    (tmp_path / PIECES_FILE).write_bytes(b"PK\x03\x04 not really a zip")
    assert PieceStore.load(tmp_path, DIM, "m") is None


def test_save_is_atomic(tmp_path: Path) -> None:
    store = PieceStore(DIM, "m")
    store.add([1], [pieces(1, 2)[0]])
    store.save(tmp_path)
    before = (tmp_path / PIECES_FILE).read_bytes()
    store.add([2], [pieces(2, 2)[0]])
    broken = PieceStore(DIM, "m")
    broken._chunks = {3: "not pieces"}  # writing fails half-way
    with pytest.raises(AttributeError):
        broken.save(tmp_path)
    assert (tmp_path / PIECES_FILE).read_bytes() == before  # the old file is intact
    assert [f for f in os.listdir(tmp_path) if f != PIECES_FILE] == []  # no temp file left


def test_bad_pieces_are_refused() -> None:
    store = PieceStore(DIM, "m")
    with pytest.raises(ValueError, match="dim"):
        store.add([1], [make_pieces([(0, 3, "sentence")], np.ones((1, 4)), [[]])])
    with pytest.raises(ValueError):
        make_pieces([(0, 3, "paragraph")], np.ones((1, DIM)), [[]])
    with pytest.raises(ValueError, match="length"):
        store.add([1, 2], [pieces(1, 1)[0]])


def test_pooled_vectors_come_from_the_chunk_pass(embedder) -> None:  # noqa: ANN001
    text = "Staff get ten sick days a year. " + "Badges cost 10,000 KRW to replace. " * 60
    text += "The last sentence is past the window."
    full = f"Handbook > Leave\n{text}"
    vecs, [got] = build_pieces(embedder, [full], [text], Tokenizer())
    assert np.abs(vecs - embedder.embed([full])).max() < 1e-5  # chunk vectors as before
    assert text[got.starts[0] : got.ends[0]] == "Staff get ten sick days a year."
    first = embedder.embed(["Staff get ten sick days a year."])[0]
    assert float(got.vectors[0].astype(np.float32) @ first) > 0.6  # close to embedding it alone
    last = embedder.embed(["The last sentence is past the window."])[0]
    # the model saw 256 tokens: the last sentence was embedded on its own
    assert float(got.vectors[-1].astype(np.float32) @ last) > 0.999
    norms = np.linalg.norm(got.vectors.astype(np.float32), axis=1)
    assert np.allclose(norms, 1.0, atol=2e-3)
    assert got.piece_terms()[0] == ["staff", "get", "ten", "sick", "days", "year"]
    with pytest.raises(ValueError, match="end with"):
        build_pieces(embedder, ["something else"], [text], Tokenizer())
