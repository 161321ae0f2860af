"""The on-prem RAG chat appliance: configuration, CLI, database, auth, HTTP API and wiring."""

__version__ = "0.1.0"
