"""Issue #31, item 3: documents were keyed by bare file name, so two folders that both hold
``index.html``, ingested into one collection, silently became one document (data loss). A
file of an ingested folder is now keyed by its path below the folder: same-named files in two
folders stay two documents, and the same path ingested again replaces its document alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select
from support.appliances import build_small_appliance

from appliance.core.db.models import Document
from appliance.core.names import stored_path

ALPHA = "<html><body><h1>Alpha team</h1><p>The alpha door code is 4417.</p></body></html>"
BETA = "<html><body><h1>Beta team</h1><p>The beta door code is 9023.</p></body></html>"


@pytest.fixture(scope="module")
def small(tmp_path_factory, model_dir, engine, embedder, config_for):  # noqa: ANN001, ANN201
    appliance = build_small_appliance(
        tmp_path_factory.mktemp("identity"), model_dir, engine, embedder, config_for
    )
    yield appliance
    appliance.db.dispose()


def _documents(appliance) -> dict[str, str]:  # noqa: ANN001
    """source path -> title, of every document."""
    with appliance.db.session() as s:
        return {d.source_path: d.title for d in s.scalars(select(Document))}


def test_same_named_files_in_two_folders_stay_two_documents(small, tmp_path: Path) -> None:  # noqa: ANN001
    for folder, page in (("alpha", ALPHA), ("beta", BETA)):
        (tmp_path / "site" / folder).mkdir(parents=True)
        (tmp_path / "site" / folder / "index.html").write_text(page, encoding="utf-8")
    results = small.ingest.ingest_folder(tmp_path / "site")
    assert sorted((r.name, r.status) for r in results) == [
        ("alpha/index.html", "indexed"),
        ("beta/index.html", "indexed"),
    ]
    docs = _documents(small)
    assert {"alpha/index.html", "beta/index.html"} <= set(docs)
    # both are retrievable: nothing was lost
    for code in ("4417", "9023"):
        hits, _ms = small.knowledge.retrieve(f"door code {code}", k=4)
        assert any(code in h.text for h in hits), code

    # a new version of one page replaces that page only
    changed = ALPHA.replace("4417", "5521")
    (tmp_path / "site" / "alpha" / "index.html").write_text(changed, encoding="utf-8")
    again = {r.name: r.status for r in small.ingest.ingest_folder(tmp_path / "site")}
    assert again == {"alpha/index.html": "updated", "beta/index.html": "duplicate"}
    after = _documents(small)
    assert set(after) == set(docs)  # still one document per path
    texts = " ".join(h.text for h in small.knowledge.retrieve("alpha door code", k=4)[0])
    assert "5521" in texts and "4417" not in texts


def test_a_stored_path_is_clean() -> None:
    assert stored_path(["..", "team a", "pol\x00icy", ".", "index.html"]) == (
        "team a/policy/index.html"
    )
    assert stored_path(["인사", "휴가 규정.hwpx"]) == "인사/휴가 규정.hwpx"
    assert len(stored_path(["x" * 300] * 10 + ["a.md"])) <= 1000
