"""The block keys of each stored document, per collection: the counts ``rag.boilerplate``
judges repeated blocks by (thin I/O: one JSON file beside the index, written atomically).

Documents are named by their stored path in their collection, so ingesting the same path
again replaces its entry instead of counting it twice.
"""

from __future__ import annotations

import json
from pathlib import Path

from rag.atomic import atomic_write

BLOCKS_FILE = "blocks.json"


class BlockStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._docs: dict[str, dict[str, frozenset[str]]] = {}
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            self._docs = {
                c: {name: frozenset(keys) for name, keys in docs.items()} for c, docs in raw.items()
            }
        except (OSError, ValueError, AttributeError):
            self._docs = {}

    @classmethod
    def beside(cls, index_dir: Path) -> BlockStore:
        return cls(index_dir / BLOCKS_FILE)

    def collection(self, collection: str) -> dict[str, frozenset[str]]:
        """A copy of the collection's documents' block keys, by stored path."""
        return dict(self._docs.get(collection, {}))

    def put(self, collection: str, name: str, keys: frozenset[str]) -> None:
        self._docs.setdefault(collection, {})[name] = keys

    def drop(self, collection: str, name: str) -> None:
        self._docs.get(collection, {}).pop(name, None)

    def save(self) -> None:
        data = {c: {n: sorted(k) for n, k in docs.items()} for c, docs in self._docs.items()}
        atomic_write(
            self.path, lambda tmp: Path(tmp).write_text(json.dumps(data), encoding="utf-8")
        )
