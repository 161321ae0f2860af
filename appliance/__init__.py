"""The on-prem RAG chat appliance, in two layers that run one way:

- ``core``: typed config, database and migrations, auth, services, app metrics;
- the edges, over it: ``wiring`` (the composition root, the only importer of ``ui``), ``api``
  (HTTP), ``cli``, ``ops`` (backup, doctor) and ``bench`` (benchmarks).

``docs/architecture.md`` has the rules and a chat turn's path through the files.
"""

__version__ = "0.1.0"
