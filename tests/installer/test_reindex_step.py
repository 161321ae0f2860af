"""An install that brings another embedding model embeds the documents again before start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from appliance.core.config import ConfigError
from appliance.core.db.session import Database
from appliance.wiring.appliance import build_appliance, open_knowledge
from installer import reindex
from rag.embeddings import Embedder, default_model_dir

DOC = b"# Travel\n\nThe travel budget is 400 euros per trip, booked through the portal.\n"


def test_an_embedder_switch_is_embedded_again(
    tmp_path: Path,
    model_dir: Path,
    engine,  # noqa: ANN001
    embedder,  # noqa: ANN001
    config_for,  # noqa: ANN001
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = tmp_path / "data"
    config = config_for(data, model_dir, bootstrap={"ingest_sample_corpus": False})
    app = build_appliance(config, engine=engine, embedder=embedder)
    try:
        app.ingest.ingest_bytes("travel.md", DOC)
        ids = app.knowledge.index.ids()
    finally:
        app.db.dispose()
    index_dir = config.paths.index_dir
    assert reindex.needs_reindex(index_dir, "") is None  # the same bundled model
    # a bundle's other sentence-transformers directory (here: the same weights, another model
    # as far as the index knows, so that the test loads no second model from anywhere)
    other = tmp_path / "bundle-embedder"
    other.symlink_to(default_model_dir(), target_is_directory=True)
    assert reindex.needs_reindex(index_dir, str(other)) == "all-MiniLM-L6-v2"
    toml = tmp_path / "appliance.toml"
    toml.write_text(
        f'[paths]\ndata_dir = "{data}"\n[engine]\nmodel_path = "{model_dir}"\n'
        f'[rag]\nembedding_model_path = "{other}"\n'
    )
    assert reindex.main([str(toml), "--check"]) == 0
    assert json.loads(capsys.readouterr().out) == {"reindex_from": "all-MiniLM-L6-v2"}
    assert reindex.main([str(toml)]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done == {"reindexed": len(ids), "from": "all-MiniLM-L6-v2", "to": "bundle-embedder"}
    db = Database(config.database_url)
    try:
        kb = open_knowledge(config, db, Embedder(other))  # the new one opens it, in full
        assert kb.index.ids() == ids and kb.pieces.ids() == ids
        assert kb.retrieve("travel budget per trip", 1)[0][0].chunk_id in ids
        with pytest.raises(ConfigError, match="appliance ingest --reindex"):
            open_knowledge(config, db, embedder)  # and the old one is refused now
    finally:
        db.dispose()
    assert reindex.main([str(toml)]) == 0  # a second run has nothing to do
    assert json.loads(capsys.readouterr().out) == {"reindexed": None}
