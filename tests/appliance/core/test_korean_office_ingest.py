"""Korean office files end to end: an HWPX, an HWP, an XLSX, a CSV and broken files ingested
in one batch through the real ingest service, then one question per fact through the chat
service (extractive mode: the evidence card and citations, nothing generated)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.appliances import build_small_appliance
from support.korean_office import HWP_DIR, hwpx_bytes, xlsx_bytes

from appliance.core.services.chat import RetrievalEvent

POLICY = [
    ("h", "시설 관리 규정"),
    "The walrus sculpture in the lobby is polished every Thursday by the facilities team.",
    ("h", "회의실 장비"),
    [
        ["Room", "Projector", "Capacity"],
        ["Orchid hall", "Epson EB-992", "48"],
        ["Lotus room", "", "12"],
    ],
]
BUDGET = {
    "Summary": [["Item", "Owner"], ["Stationery", "General affairs"]],
    "Catering": [["Vendor", "Contract", "Monthly fee"], ["Pelican Kitchen", "C-2291", 1870000]],
}
SHUTTLE = "Route,Departure\nGangnam loop,08:15\nMarmot express,07:05\n"

# (question, the fact that must be on the card or in a citation)
FACTS = [
    ("How often is the walrus sculpture in the lobby polished?", "polished every Thursday"),
    ("Which projector does the Orchid hall have?", "Epson EB-992"),
    ("What is the monthly fee of the Pelican Kitchen catering vendor?", "1870000"),
    ("When does the Marmot express shuttle depart?", "Marmot express, Departure: 07:05"),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory, model_dir, engine, embedder, config_for):  # noqa: ANN001, ANN201
    app = build_small_appliance(
        tmp_path_factory.mktemp("korean-office"), model_dir, engine, embedder, config_for
    )
    app.settings.update("admin", {"answer_mode": "extractive"})
    folder = tmp_path_factory.mktemp("batch")
    files = {
        "facilities.hwpx": hwpx_bytes(POLICY),
        "anthem.hwp": (HWP_DIR / "sample_document.hwp").read_bytes(),
        "budget.xlsx": xlsx_bytes(BUDGET),
        "shuttle.csv": SHUTTLE.encode(),
        "broken.xlsx": xlsx_bytes(BUDGET)[:700],
        "secret.hwp": (HWP_DIR / "protected_document.hwp").read_bytes(),
        "empty.hwpx": b"",
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    results = app.ingest.ingest_paths(sorted(Path(folder).iterdir()))
    user = app.auth.create_user("office-staff", "password-123")
    yield app, user, {r.name: r for r in results}
    app.db.dispose()  # the engine is the session's: other modules use it after this one


def test_the_batch_ingests_the_good_files_and_names_the_bad(site) -> None:  # noqa: ANN001
    _, _, results = site
    good = ("facilities.hwpx", "anthem.hwp", "budget.xlsx", "shuttle.csv")
    assert {n: results[n].status for n in good} == dict.fromkeys(good, "indexed")
    assert results["broken.xlsx"].status == "error"
    assert (
        "damaged" in results["broken.xlsx"].error or "not an XLSX" in results["broken.xlsx"].error
    )
    assert results["secret.hwp"].status == "error"
    assert "protected document" in results["secret.hwp"].error
    assert results["empty.hwpx"].error == "the file is empty"


@pytest.mark.parametrize(("question", "fact"), FACTS)
def test_each_fact_is_found_by_the_chat(site, question: str, fact: str) -> None:  # noqa: ANN001
    app, user, _ = site
    first = list(app.chat.ask(user, question))[0]
    assert isinstance(first, RetrievalEvent)
    shown = [span.text for span in first.evidence] + [c.text for c in first.citations]
    assert any(fact in text for text in shown), (question, shown)


def test_the_hwp_text_is_found_by_the_chat(site) -> None:  # noqa: ANN001
    app, user, _ = site
    first = list(app.chat.ask(user, "하느님이 보우하사 우리나라 만세"))[0]
    assert any("하느님이 보우하사" in c.text for c in first.citations)
