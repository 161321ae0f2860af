"""Shared by the admin test modules: a small appliance of their own (no sample corpus, so
uploads and settings changes never touch the session appliance), and one chat turn."""

from __future__ import annotations

from pathlib import Path

AQUARIUM = (
    "# Office aquarium care\n\n"
    "## Feeding\n\nThe office aquarium fish are fed twice a day with flake food by the "
    "facilities team. Weekend feeding uses the automatic feeder on the left shelf.\n\n"
    "## Cleaning\n\nThe aquarium glass is cleaned every Tuesday. Water changes of twenty "
    "percent happen on the first Monday of each month.\n"
)
PARKING = (
    "Bicycle parking\n\nBicycles are parked in the basement cage on level B2. "
    "The cage code changes every quarter and is posted on the intranet.\n"
)


def build_small_appliance(data_dir: Path, model_dir: Path, engine, embedder, config_for):  # noqa: ANN001, ANN201
    from appliance.wiring.appliance import build_appliance

    config = config_for(data_dir, model_dir, bootstrap={"ingest_sample_corpus": False})
    return build_appliance(config, engine=engine, embedder=embedder)


def ask(appliance, principal, question: str) -> list:  # noqa: ANN001
    """One full turn through the chat service; the events."""
    return list(appliance.chat.ask(principal, question))
