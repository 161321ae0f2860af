"""Admin services against the real parts: ingest, both indexes, SQLite, the engine."""

from __future__ import annotations

import csv
import io
import json
import shutil
import time
from pathlib import Path

import pytest
from support.appliances import AQUARIUM, PARKING, ask, build_small_appliance
from support.paths import FIXTURES

from appliance.core.db.models import Feedback, Message
from appliance.core.services.admin import AdminError, Upload
from appliance.core.services.admin.planner import PlanError, plan_capacity
from appliance.core.services.admin.sampler import MetricsSampler
from appliance.core.services.admin.series import percentile
from appliance.core.services.chat import DoneEvent
from appliance.wiring.appliance import build_console
from engine.sglang import plan as plan_cli

FIX = FIXTURES / "sglang"


@pytest.fixture(scope="module")
def box(tmp_path_factory, model_dir, engine, embedder, config_for):  # noqa: ANN001, ANN201
    appliance = build_small_appliance(
        tmp_path_factory.mktemp("admin-services"), model_dir, engine, embedder, config_for
    )
    yield appliance, build_console(appliance, sample_interval_s=0.2)
    appliance.db.dispose()


def test_upload_many_files_each_gets_its_own_result_and_history_row(box) -> None:  # noqa: ANN001
    _appliance, admin = box
    seen = []
    results = admin.documents.upload(
        [
            Upload("aquarium.md", AQUARIUM.encode()),
            Upload("parking.txt", PARKING.encode()),
            Upload("empty.txt", b""),
            Upload("tool.exe", b"MZ\x90\x00"),
            Upload("aquarium-copy.md", AQUARIUM.encode()),
        ],
        "facilities",
        "boss",
        progress=lambda i, r: seen.append((i, r.status)),
    )
    assert [r.status for r in results] == ["indexed", "indexed", "error", "error", "duplicate"]
    assert seen == [(i, r.status) for i, r in enumerate(results)]
    assert all(r.error for r in results[2:4])
    history = admin.documents.ingestion_history()
    assert [h["status"] for h in history[:5]] == [
        "unchanged",
        "failed",
        "failed",
        "indexed",
        "indexed",
    ]
    assert history[4]["file"] == "aquarium.md" and history[4]["chunks"] >= 1
    assert history[4]["actor"] == "boss" and history[2]["error"]
    listed = admin.documents.list_documents("facilities")
    assert {d["name"] for d in listed} == {"aquarium.md", "parking.txt"}
    assert admin.documents.collections() == [
        {"collection": "facilities", "documents": 2, "users": 0}
    ]
    with pytest.raises(AdminError, match="collection"):
        admin.documents.upload([Upload("x.md", b"# x\n\ntext")], "  ", "boss")


def test_search_reindex_move_rename_and_delete(box) -> None:  # noqa: ANN001
    appliance, admin = box
    docs = admin.documents
    hits = docs.search_chunks("When is the aquarium glass cleaned?")
    assert hits[0]["document"] == "aquarium.md"
    doc_id = next(d["id"] for d in docs.list_documents() if d["name"] == "aquarium.md")
    assert docs.reindex(doc_id, "boss") >= 1
    assert docs.search_chunks("aquarium glass cleaning")[0]["document"] == "aquarium.md"

    docs.move(doc_id, "pets", "boss")
    only_facilities = docs.search_chunks("aquarium glass", collection="facilities")
    assert all(h["document"] != "aquarium.md" for h in only_facilities)
    found, _ = appliance.knowledge.retrieve("aquarium glass", 4, frozenset({"pets"}))
    assert found and found[0].source == "aquarium.md"

    appliance.auth.create_user("fishkeeper", "password-123")
    appliance.auth.set_collections("fishkeeper", ["pets"])
    assert docs.rename_collection("pets", "animals", "boss") == 1
    assert appliance.auth.principal_for("fishkeeper").collections == frozenset({"animals"})
    found, _ = appliance.knowledge.retrieve("aquarium glass", 4, frozenset({"animals"}))
    assert found and found[0].source == "aquarium.md"
    with pytest.raises(AdminError, match="no collection"):
        docs.rename_collection("nothing-here", "x", "boss")

    docs.delete(doc_id, "boss")
    assert all(h["document"] != "aquarium.md" for h in docs.search_chunks("aquarium glass"))
    with pytest.raises(AdminError, match="no document"):
        docs.delete(doc_id, "boss")
    actions = [e["action"] for e in admin.audit.query("documents", "boss")]
    for action in ("document.add", "document.reindex", "document.move", "document.delete"):
        assert action in actions


def test_users_roles_guards_passwords_and_api_keys(box) -> None:  # noqa: ANN001
    appliance, admin = box
    users, auth = admin.users, appliance.auth
    assert auth.list_users()[0].role == "admin"  # the bootstrap admin
    boss = auth.list_users()[0].username
    password = users.create(boss, "dana", "", "staff", ["hr", "it"])
    assert len(password) >= 12 and auth.authenticate("dana", password) is not None
    row = next(u for u in users.list_users() if u["username"] == "dana")
    assert row["collections"] == "hr, it" and row["status"] == "active"
    with pytest.raises(AdminError, match="already exists"):
        users.create(boss, "dana", "password-1", "staff", [])
    # a refused collection name creates no user (one transaction), so the name stays free
    with pytest.raises(AdminError, match="collection"):
        users.create(boss, "erin", "password-123", "staff", ["ops", "x" * 65])
    assert auth.principal_for("erin") is None
    users.create(boss, "erin", "password-123", "staff", ["ops"])
    assert auth.principal_for("erin").collections == frozenset({"ops"})

    with pytest.raises(AdminError, match="your own"):
        users.set_disabled(boss, boss, True)
    with pytest.raises(AdminError, match="own admin role"):
        users.set_role(boss, boss, "staff")
    users.set_role(boss, "dana", "admin")
    assert auth.principal_for("dana").is_admin
    users.set_role("dana", boss, "staff")  # another admin may demote the first one...
    with pytest.raises(AdminError, match="last enabled admin"):
        users.set_role(boss, "dana", "staff")  # ...but the last admin stays one
    users.set_role("dana", boss, "admin")
    users.set_role(boss, "dana", "staff")

    token = auth.login("dana", password).token
    users.set_disabled(boss, "dana", True)
    assert auth.principal_for("dana") is None and auth.resolve(token) is None
    users.set_disabled(boss, "dana", False)
    fresh = users.reset_password(boss, "dana").password
    assert auth.authenticate("dana", fresh) and not auth.authenticate("dana", password)
    users.set_collections(boss, "dana", ["finance"])
    assert auth.principal_for("dana").collections == frozenset({"finance"})

    key = users.create_key(boss, "dana", "reporting")
    assert auth.api_keys.resolve(key).username == "dana"
    listed = users.list_keys()
    assert listed[0]["username"] == "dana" and key.startswith(listed[0]["prefix"])
    assert key not in json.dumps(listed)  # only the prefix is ever shown again
    users.revoke_key(boss, listed[0]["id"])
    assert auth.api_keys.resolve(key) is None
    assert users.list_keys()[0]["status"] == "revoked"
    actions = {e["action"] for e in admin.audit.query("admin actions", boss)}
    assert {"admin.user.create", "admin.user.disable", "admin.user.password"} <= actions
    assert {"admin.apikey.create", "admin.apikey.revoke", "admin.user.role"} <= actions


def test_turns_feed_analytics_charts_and_feedback(box) -> None:  # noqa: ANN001
    appliance, admin = box
    staff = appliance.auth.create_user("analyst", "password-123")
    appliance.auth.set_collections("analyst", ["facilities"])
    admin.sampler.sample()
    for question in ("Where do bicycles park?", "Who changes the cage code?"):
        assert isinstance(ask(appliance, staff, question)[-1], DoneEvent)
    point = admin.sampler.sample()
    assert point is not None and point.throughput_tps > 0 and 0 < point.kv_usage <= 1
    assert len(admin.sampler.samples()) == 2

    series = admin.sampler.turn_series()
    assert len(series) == 2
    assert all(s["ttft_p50_ms"] <= s["ttft_p95_ms"] for s in series)
    assert 0.0 <= series[-1]["turn_hit_rate"] <= 1.0

    today = admin.analytics.questions_per_day(7)
    assert len(today) == 7 and today[-1]["questions"] >= 2
    assert {"user": "analyst", "questions": 2} in admin.analytics.questions_per_user()
    assert admin.analytics.feedback() == {"up": 0, "down": 0, "ratio": None}
    with appliance.db.session() as s:
        answers = [m.id for m in s.query(Message).filter(Message.role == "assistant")]
        s.add_all(
            [
                Feedback(message_id=answers[0], user_id=staff.user_id, rating=1),
                Feedback(message_id=answers[1], user_id=staff.user_id, rating=-1),
            ]
        )
    assert admin.analytics.feedback() == {"up": 1, "down": 1, "ratio": 0.5}


def test_sampler_thread_keeps_a_bounded_series(box) -> None:  # noqa: ANN001
    appliance, _admin = box
    sampler = MetricsSampler(appliance.engine, appliance.db, interval_s=0.05, capacity=3)
    sampler.start()
    try:
        deadline = time.monotonic() + 10
        while len(sampler.samples()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        sampler.stop()
    stamps = [s.at for s in sampler.samples()]
    assert len(stamps) == 3 and stamps == sorted(stamps)


def test_audit_filters_and_csv_export(box) -> None:  # noqa: ANN001
    appliance, admin = box
    appliance.auth.authenticate("analyst", "wrong-password")
    appliance.auth.authenticate("=cmd|' /C calc'!A0", "x")  # a hostile "username"
    logins = admin.audit.query("logins")
    assert {"login.failed"} <= {e["action"] for e in logins}
    assert all(e["action"].startswith("login") for e in logins)
    text = admin.audit.csv("logins")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == ["id", "at", "actor", "action", "detail"]
    assert len(rows) == len(logins)
    assert all(not r["actor"].startswith("=") for r in rows)  # no formula injection
    assert any(r["actor"] == "'=cmd|' /C calc'!A0" for r in rows)
    with pytest.raises(ValueError, match="category"):
        admin.audit.query("nonsense")


def test_settings_change_applies_to_the_next_turn_and_is_audited(box) -> None:  # noqa: ANN001
    appliance, admin = box
    staff = appliance.auth.principal_for("analyst")
    admin.settings.update("boss", {"top_k": 1, "max_new_tokens": 3})
    events = ask(appliance, staff, "Where do bicycles park?")
    assert len(events[0].citations) == 1
    assert events[-1].stats.completion_tokens <= 3
    change = admin.audit.query("admin actions", "boss")[0]
    assert change["action"] == "settings.update" and '"top_k": [4, 1]' in change["detail"]
    admin.settings.update("boss", {"top_k": 4, "max_new_tokens": 24})


def test_engine_status_and_audited_flush(box) -> None:  # noqa: ANN001
    appliance, admin = box
    status = admin.engine.status()
    assert status["backend"] == "embedded" and status["healthy"] is True
    assert status["launch"]["kv_budget_tokens"] > 0 and status["context_length"] > 0
    assert status["launch"]["speculative_algorithm"] == "ngram"
    # the engine's speculation record once a step has verified drafts (the box has answered)
    metrics = appliance.engine.metrics()
    if metrics["spec_verify_steps_total"]:
        spec = status["speculation"]
        assert spec["accept_rate"] == pytest.approx(metrics["spec_accept_rate"], abs=0.05)
        assert spec["accept_length"] >= 1.0
    else:
        assert "speculation" not in status
    admin.engine.flush_cache("boss")
    assert admin.audit.query("admin actions", "boss")[0]["action"] == "admin.engine.flush_cache"


def test_planner_matches_the_plan_cli(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    model = tmp_path / "llama-8b"
    model.mkdir()
    shutil.copy(FIX / "config_8b.json", model / "config.json")
    plan = plan_capacity("h100 — H100 80GB", 1, "", 32768, model_dir=str(model))
    argv = ["--model-path", str(model), "--gpus-csv", str(FIX / "nvidia_smi_h100.csv")]
    argv += ["--context-length", "32768", "--print", "json"]
    assert plan_cli.main(argv) == 0
    [cli] = json.loads(capsys.readouterr().out)["workers"]
    assert plan.kv_capacity_tokens == cli["kv_capacity_tokens"]
    assert plan.max_sessions == cli["kv_capacity_tokens"] // 32768 > 0
    assert plan.mem_fraction_static == cli["mem_fraction_static"]
    assert "--tp-size 1" in plan.command and "--context-length 32768" in plan.command
    assert dict(plan.capacity_table)[4096] == cli["kv_capacity_tokens"] // 4096

    big = plan_capacity("h200 — H200 141GB", 2, "Llama-3.3-70B-Instruct", 65536)
    assert big.tp == 2 and big.workers == 1 and big.max_sessions >= 1
    # an 8B on two cards: a worker per card, both commands shown, sessions summed
    two = plan_capacity("h100 — H100 80GB", 2, "", 32768, model_dir=str(model))
    assert (two.tp, two.workers, two.max_sessions) == (1, 2, 2 * plan.max_sessions)
    assert "CUDA_VISIBLE_DEVICES=1 " in two.command.splitlines()[1]
    with pytest.raises(PlanError, match="does not fit"):
        plan_capacity("l40s — L40S 48GB", 1, "Llama-3.3-70B-Instruct", 32768)
    with pytest.raises(PlanError, match="config.json"):
        plan_capacity("h100 — H100 80GB", 1, "", 32768, model_dir=str(tmp_path))
    with pytest.raises(PlanError, match="context length"):
        plan_capacity("h100 — H100 80GB", 1, "Qwen2.5-7B-Instruct", 10)


def test_percentile_interpolates() -> None:
    assert percentile([10.0], 95) == 10.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([0.0, 100.0], 95) == 95.0


def test_status_and_samples_of_an_sglang_backend(base, tmp_path, model_dir, config_for) -> None:  # noqa: ANN001
    """The GPU profiles' path, against a real SGLang-compatible server (the embedded engine's):
    launch arguments from its /get_server_info, chart samples scraped from its /metrics."""
    from appliance.core.db.session import Database
    from appliance.core.metrics import AppMetrics
    from appliance.core.services.admin.engine_status import EngineStatus
    from engine.sglang.client import SGLangEngine

    config = config_for(tmp_path, model_dir, engine={"backend": "sglang", "sglang_url": base})
    db = Database(f"sqlite:///{tmp_path / 'status.db'}")
    db.migrate()
    client = SGLangEngine(base)
    try:
        status = EngineStatus(client, config, db).status()
        assert status["backend"] == "sglang" and status["healthy"] is True
        assert status["launch"]["sglang_url"] == base
        assert Path(status["launch"]["model_path"]).name == model_dir.name
        assert status["launch"]["served_model_name"] == status["model"]
        assert status["launch"]["context_length"] == status["context_length"]
        point = MetricsSampler(client, db).sample()
        assert point is not None and 0.0 <= point.kv_usage <= 1.0
        assert AppMetrics(client).engine_metrics is None  # SGLang serves its own /metrics
    finally:
        client.close()
        db.dispose()

    down = SGLangEngine("http://127.0.0.1:9", connect_retries=0)
    status = EngineStatus(down, config, db).status()
    assert status["healthy"] is False and status["error"]
    sampler = MetricsSampler(down, db)
    assert sampler.sample() is None and "refused" in sampler.last_error


def test_admin_queries_on_postgresql(  # noqa: ANN001
    pg_url, tmp_path, model_dir, engine, embedder, config_for
) -> None:
    """The same services on PostgreSQL (multi-node sites): grouping, renames, time windows."""
    from appliance.wiring.appliance import build_appliance

    config = config_for(
        tmp_path,
        model_dir,
        database={"url": pg_url},
        bootstrap={"ingest_sample_corpus": False},
    )
    appliance = build_appliance(config, engine=engine, embedder=embedder)
    try:
        admin = build_console(appliance)
        [result] = admin.documents.upload([Upload("parking.txt", PARKING.encode())], "ops", "root")
        assert result.status == "indexed"
        admin.users.create("admin", "pat", "password-123", "staff", ["ops"])
        assert admin.documents.rename_collection("ops", "facilities", "admin") == 1
        assert admin.documents.collections() == [
            {"collection": "facilities", "documents": 1, "users": 1}
        ]
        pat = appliance.auth.principal_for("pat")
        assert isinstance(ask(appliance, pat, "Where do bicycles park?")[-1], DoneEvent)
        assert admin.analytics.questions_per_user() == [{"user": "pat", "questions": 1}]
        assert admin.analytics.questions_per_day(1)[0]["questions"] == 1
        assert len(admin.sampler.turn_series()) == 1
        assert admin.documents.ingestion_history()[0]["status"] == "indexed"
        assert "collection.rename" in admin.audit.csv("admin actions")
    finally:
        appliance.db.dispose()


def test_rolling_stats_say_how_far_the_shadow_was_from_the_engine() -> None:
    from datetime import UTC, datetime

    from appliance.core.services.admin.series import Turn, rolling_turn_stats

    at = datetime.now(UTC)
    turns = [
        Turn(at, 100.0, 1000, 500, 10, 900.0),  # stored before predictions were recorded
        Turn(at, 100.0, 1000, 600, 10, 900.0, predicted_cached=650),
        Turn(at, 100.0, 2000, 1500, 10, 900.0, predicted_cached=1400),
    ]
    out = rolling_turn_stats(turns)
    assert out[0]["shadow_error"] is None
    assert out[1]["shadow_error"] == 50 / 1000
    assert out[2]["shadow_error"] == (50 + 100) / 3000
