"""Run inside the installed venv: embed the index again when the config names another embedder.

    python -m installer.reindex CONFIG [--check]

An install or upgrade that brings another embedding model (a bundle with another
sentence-transformers directory) leaves an index the appliance refuses to open, since vectors
of two embedders cannot be mixed. This embeds every chunk again with the configured one, before
the service starts. Prints one JSON line: ``{"reindexed": N, "from": OLD, "to": NEW}``, or
``{"reindexed": null}`` when the index is empty or already the configured embedder's; with
``--check``, only ``{"reindex_from": OLD or null}`` (nothing is loaded or written).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def needs_reindex(index_dir: Path, embedding_model_path: str) -> str | None:
    """The recorded embedder of ``index_dir`` when it holds vectors of another embedder than
    ``embedding_model_path``'s (another name, or the same name and another width); else
    None."""
    from rag.embeddings import embedder_dim, embedder_name
    from rag.index_embedder import other_embedder

    saved = other_embedder(
        index_dir, embedder_name(embedding_model_path), embedder_dim(embedding_model_path)
    )
    return saved.model if saved else None


def main(argv: list[str]) -> int:
    from appliance.core.config import load_config
    from rag.embeddings import embedder_name

    config = load_config(Path(argv[0]))
    old = needs_reindex(config.paths.index_dir, config.rag.embedding_model_path)
    if "--check" in argv[1:]:
        print(json.dumps({"reindex_from": old}))
        return 0
    result: dict = {"reindexed": None}
    if old is not None:
        from appliance.wiring.appliance import reindex_knowledge

        count = reindex_knowledge(config)
        result = {
            "reindexed": count,
            "from": old,
            "to": embedder_name(config.rag.embedding_model_path),
        }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
