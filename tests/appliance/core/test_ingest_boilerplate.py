"""Issue #31, item 2, at ingest: a line on most pages of a collection (site chrome that no
markup names) is not indexed, whether the pages come as one folder or one upload at a time;
the same page ingested again is not counted twice."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select
from support.appliances import build_small_appliance

from appliance.core.db.models import Chunk, Document

BANNER = "Acme Handbook 2.1 — internal use only"


def _page(i: int) -> bytes:
    return (
        f"<html><head><title>Topic {i}</title></head><body><p>{BANNER}</p>"
        f"<h1>Topic {i}</h1><p>Room {100 + i} holds the printer for team {i}; "
        f"ask desk {i} for toner and paper.</p></body></html>"
    ).encode()


@pytest.fixture(scope="module")
def small(tmp_path_factory, model_dir, engine, embedder, config_for):  # noqa: ANN001, ANN201
    appliance = build_small_appliance(
        tmp_path_factory.mktemp("boilerplate"), model_dir, engine, embedder, config_for
    )
    yield appliance
    appliance.db.dispose()


def _texts(appliance, collection: str) -> list[str]:  # noqa: ANN001
    with appliance.db.session() as s:
        return list(
            s.scalars(select(Chunk.text).join(Document).where(Document.collection == collection))
        )


def test_a_folder_is_counted_whole(small, tmp_path: Path) -> None:  # noqa: ANN001
    for i in range(6):
        (tmp_path / f"topic{i}.html").write_bytes(_page(i))
    results = small.ingest.ingest_folder(tmp_path, collection="folder")
    assert {r.status for r in results} == {"indexed"}
    texts = _texts(small, "folder")
    assert len(texts) == 6
    assert not any(BANNER in t for t in texts)
    assert all(f"Room {100 + i}" in " ".join(texts) for i in range(6))


def test_uploads_one_at_a_time_end_alike(small) -> None:  # noqa: ANN001
    for i in range(4):  # too few pages for anything to count as repeated
        small.ingest.ingest_bytes(f"topic{i}.html", _page(i), collection="uploads")
    assert sum(BANNER in t for t in _texts(small, "uploads")) == 4
    # the fifth page makes the banner repeated: it goes from the four pages stored before too
    small.ingest.ingest_bytes("topic4.html", _page(4), collection="uploads")
    texts = _texts(small, "uploads")
    assert len(texts) == 5 and not any(BANNER in t for t in texts)
    hits, _ms = small.knowledge.retrieve("Acme Handbook internal use only", k=5)
    assert not any(BANNER in h.text for h in hits)
    # a new version of a stored page is not counted twice, and stays without the banner
    changed = _page(2).replace(b"toner", b"staples")
    assert (
        small.ingest.ingest_bytes("topic2.html", changed, collection="uploads").status == "updated"
    )
    texts = _texts(small, "uploads")
    assert len(texts) == 5 and not any(BANNER in t for t in texts)
    assert any("staples" in t for t in texts)


def test_the_same_file_twice_in_one_batch_is_stored_once(small, tmp_path: Path) -> None:  # noqa: ANN001
    for name in ("a.html", "b.html"):
        (tmp_path / name).write_bytes(_page(9))
    results = small.ingest.ingest_folder(tmp_path, collection="twice")
    assert [r.status for r in results] == ["indexed", "duplicate"]
