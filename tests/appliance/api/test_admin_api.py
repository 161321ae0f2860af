"""The admin REST API and ``/metrics`` on the real web app (in-process): every admin
endpoint refuses staff, and the admin's whole round trip works over HTTP."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from support.appliances import AQUARIUM, PARKING, build_small_appliance

from appliance.wiring.web import build_web_app


@pytest.fixture(scope="module")
def web(tmp_path_factory, model_dir, engine, embedder, config_for):  # noqa: ANN001, ANN201
    appliance = build_small_appliance(
        tmp_path_factory.mktemp("admin-api"), model_dir, engine, embedder, config_for
    )
    app = build_web_app(appliance)
    # the Host names this box (``HostGuard``): TestClient's own "testserver" would not
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield appliance, client
    app.state.admin_console.sampler.stop()
    appliance.db.dispose()


def bearer(client: TestClient, username: str, password: str) -> dict:
    r = client.post("/api/login", json={"username": username, "password": password})
    assert r.status_code == 200, r.text
    return {"authorization": f"Bearer {r.json()['token']}"}


@pytest.fixture(scope="module")
def admin_h(web) -> dict:  # noqa: ANN001
    appliance, client = web
    return bearer(client, "admin", appliance.first_admin_password)


@pytest.fixture(scope="module")
def staff_h(web) -> dict:  # noqa: ANN001
    appliance, client = web
    appliance.auth.create_user("clerk", "password-123")
    return bearer(client, "clerk", "password-123")


def admin_routes(client: TestClient) -> list[tuple[str, str]]:
    """Every (method, path) under /api/admin, from the app's own OpenAPI description."""
    paths = client.app.openapi()["paths"]
    return [
        (method.upper(), re.sub(r"\{[^}]+\}", "1", path))
        for path, ops in paths.items()
        if path.startswith("/api/admin")
        for method in ops
    ]


def test_every_admin_endpoint_refuses_staff_and_anonymous_callers(web, staff_h) -> None:  # noqa: ANN001
    appliance, client = web
    routes = admin_routes(client)
    assert len(routes) >= 20
    before = appliance.ingest.document_count(), len(appliance.auth.list_users())
    for method, path in routes:
        anonymous = client.request(method, path)
        assert anonymous.status_code == 401, (method, path)
        r = client.request(method, path, headers=staff_h, json={})
        assert r.status_code == 403, (method, path, r.status_code)
        assert r.json() == {"detail": "administrators only"}
    # a real-looking staff upload and user creation are refused too, and change nothing
    files = [("files", ("x.md", b"# x\n\nsome text", "text/markdown"))]
    assert client.post("/api/admin/documents", files=files, headers=staff_h).status_code == 403
    body = {"username": "sneaky", "role": "admin"}
    assert client.post("/api/admin/users", json=body, headers=staff_h).status_code == 403
    assert (appliance.ingest.document_count(), len(appliance.auth.list_users())) == before


def test_admin_documents_over_http(web, admin_h) -> None:  # noqa: ANN001
    _appliance, client = web
    files = [
        ("files", ("aquarium.md", AQUARIUM.encode(), "text/markdown")),
        ("files", ("parking.txt", PARKING.encode(), "text/plain")),
        ("files", ("broken.pdf", b"%PDF-1.4 not really", "application/pdf")),
    ]
    r = client.post(
        "/api/admin/documents", files=files, data={"collection": "ops"}, headers=admin_h
    )
    assert r.status_code == 200, r.text
    assert [x["status"] for x in r.json()] == ["indexed", "indexed", "error"]
    docs = client.get("/api/admin/documents", params={"collection": "ops"}, headers=admin_h)
    by_name = {d["name"]: d for d in docs.json()}
    assert set(by_name) == {"aquarium.md", "parking.txt"}
    hits = client.get("/api/admin/chunks", params={"q": "bicycle cage"}, headers=admin_h).json()
    assert hits[0]["document"] == "parking.txt"
    doc = by_name["parking.txt"]["id"]
    assert client.post(f"/api/admin/documents/{doc}/reindex", headers=admin_h).json()["chunks"]
    assert client.get("/api/admin/collections", headers=admin_h).json()[0]["documents"] == 2
    runs = client.get("/api/admin/ingestion-runs", headers=admin_h).json()
    assert [x["status"] for x in runs[:3]] == ["failed", "indexed", "indexed"]
    assert client.delete(f"/api/admin/documents/{doc}", headers=admin_h).status_code == 200
    assert client.delete(f"/api/admin/documents/{doc}", headers=admin_h).status_code == 404
    assert client.get("/api/admin/chunks", params={"q": " "}, headers=admin_h).status_code == 400


def test_admin_users_settings_audit_and_engine_over_http(web, admin_h) -> None:  # noqa: ANN001
    appliance, client = web
    made = client.post(
        "/api/admin/users", json={"username": "erin", "collections": ["ops"]}, headers=admin_h
    ).json()
    erin = bearer(client, "erin", made["password"])
    key = client.post(
        "/api/admin/api-keys", json={"username": "erin", "name": "ci"}, headers=admin_h
    )
    assert key.status_code == 200 and key.json()["key"].startswith("sk-")
    assert client.patch(
        "/api/admin/users/erin", json={"disabled": True}, headers=admin_h
    ).is_success
    assert client.get("/api/me", headers=erin).status_code == 401  # sessions ended at once
    bad = client.patch("/api/admin/users/erin", json={"role": "root"}, headers=admin_h)
    assert bad.status_code == 400 and "role" in bad.json()["detail"]

    bad = client.put("/api/admin/settings", json={"top_k": 0}, headers=admin_h)
    assert bad.status_code == 400 and "top_k" in bad.json()["detail"]
    ok = client.put("/api/admin/settings", json={"temperature": 0.3}, headers=admin_h)
    assert ok.json()["temperature"] == 0.3
    assert appliance.settings.current().temperature == 0.3
    audit = client.get("/api/admin/audit", params={"category": "admin actions"}, headers=admin_h)
    assert audit.json()[0]["action"] == "settings.update" and audit.json()[0]["actor"] == "admin"
    exported = client.get("/api/admin/audit", params={"format": "csv"}, headers=admin_h)
    assert exported.headers["content-type"].startswith("text/csv")
    assert (
        exported.text.startswith("id,at,actor,action,detail\n")
        and "settings.update" in exported.text
    )

    status = client.get("/api/admin/engine", headers=admin_h).json()
    assert status["backend"] == "embedded" and status["healthy"]
    assert client.post("/api/admin/engine/flush-cache", headers=admin_h).json() == {"ok": True}
    series = client.get("/api/admin/engine/series", headers=admin_h).json()
    assert series["engine"] and set(series["engine"][0]) >= {"at", "hit_rate", "kv_usage"}
    plan = client.post(
        "/api/admin/planner",
        json={"gpu": "h200 — H200 141GB", "model": "Qwen2.5-32B-Instruct", "context_length": 32768},
        headers=admin_h,
    )
    assert plan.status_code == 200 and plan.json()["max_sessions"] > 0
    assert "sglang.launch_server" in plan.json()["command"]
    usage = client.get("/api/admin/analytics", headers=admin_h).json()
    assert len(usage["per_day"]) == 30 and usage["feedback"]["ratio"] is None


def test_metrics_endpoint_serves_app_and_engine_metrics(web, admin_h) -> None:  # noqa: ANN001
    _appliance, client = web
    r = client.get("/metrics", headers=admin_h)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    for name in (
        "appliance_retrieval_latency_seconds_bucket",
        "appliance_chat_turns_total",
        "appliance_errors_total",
        "sglang:num_running_reqs",
        "sglang:cache_hit_rate",
        "sglang:time_to_first_token_seconds_bucket",
    ):
        assert name in r.text, name
