"""The core: typed config, database and migrations, auth, services and app metrics.

It imports ``engine`` and ``rag`` and nothing else of ours: no edge (wiring, HTTP, CLI, ops,
benchmarks) and no ``ui``."""
